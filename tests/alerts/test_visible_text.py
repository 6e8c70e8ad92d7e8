"""Invisible and direction-changing characters typed by users (notes, names) are shown as ⟨U+XXXX⟩ on the
pages, in the admin and in every message; the stored value stays as typed."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.alerts import channels, evaluate
from dashboard.alerts.models import (
    Channel,
    ChannelKind,
    ChannelMessage,
    Incident,
    Notification,
    NotificationKind,
)
from tests.alerts.factories import failures, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db

RLO, ZWSP = "\u202e", "\u200b"
SHOWN_RLO, SHOWN_ZWSP = "⟨U+202E⟩", "⟨U+200B⟩"


def slack_channel() -> Channel:
    return Channel.objects.create(name=f"slack-ops {RLO}evil", kind=ChannelKind.SLACK)


def test_it_shows_a_note_and_the_rule_name_on_the_incident_page(staff: Client) -> None:
    make_rule(name=f"Failed {RLO}deliveries")
    failures(make_source(), fixed_now(), 2)
    evaluate.evaluate_all(fixed_now())
    incident = Incident.objects.get()
    staff.post(f"/alerts/incidents/{incident.pk}/notes/", {"text": f"rolled back {RLO}evil{ZWSP} deploy"})

    html = staff.get(f"/alerts/incidents/{incident.pk}/").content.decode()
    assert f"rolled back {SHOWN_RLO}evil{SHOWN_ZWSP} deploy" in html
    assert f"Failed {SHOWN_RLO}deliveries" in html
    assert RLO not in html and ZWSP not in html
    assert RLO in incident.events.get().text
    assert RLO not in staff.get("/alerts/").content.decode()


def test_it_shows_the_rule_and_channel_names_in_messages() -> None:
    rule = make_rule(name=f"Failed {RLO}deliveries")
    rule.channels.add(slack_channel())
    failures(make_source(), fixed_now(), 2)
    evaluate.evaluate_all(fixed_now())

    mail = Notification.objects.get(kind=NotificationKind.OPENED)
    for text in (mail.subject, mail.body_text, mail.body_html):
        assert RLO not in text
    assert f"Failed {SHOWN_RLO}deliveries" in mail.body_text
    message = ChannelMessage.objects.get(kind=NotificationKind.OPENED)
    assert f"Failed {SHOWN_RLO}deliveries" in message.payload["text"]
    assert RLO not in message.payload["title"] + message.payload["text"]


def test_it_shows_the_channel_name_in_the_test_message() -> None:
    delivery = channels.create_test(slack_channel(), fixed_now())
    assert f"slack-ops {SHOWN_RLO}evil" in delivery.payload["title"]
    assert f"slack-ops {SHOWN_RLO}evil" in delivery.payload["text"]
    assert RLO not in delivery.payload["title"] + delivery.payload["text"]


def test_it_shows_the_channel_name_in_the_admin(staff: Client) -> None:
    channel = slack_channel()
    delivery = channels.create_test(channel, fixed_now())

    listing = staff.get("/admin/alerts/channel/").content.decode()
    assert f"slack-ops {SHOWN_RLO}evil" in listing and RLO not in listing
    change = staff.get(f"/admin/alerts/channelmessage/{delivery.pk}/change/").content.decode()
    assert f"Test message to slack-ops {SHOWN_RLO}evil" in change
    assert RLO not in change
    channel.refresh_from_db()
    assert channel.name == f"slack-ops {RLO}evil"


def test_it_names_channel_messages_for_a_channel(staff: Client) -> None:
    delivery = channels.create_test(slack_channel(), fixed_now())
    assert delivery.get_kind_display() == "Test message"
    assert str(delivery) == f"Test message to slack-ops {SHOWN_RLO}evil"
    index = staff.get("/admin/").content.decode()
    assert "Channel messages" in index and "Channel deliveries" not in index


ALM = "\u061c"
SHOWN_ALM = "⟨U+061C⟩"


def test_it_shows_the_rule_name_on_the_overview(staff: Client) -> None:
    make_rule(name=f"Failed {RLO}deliveries{ALM}")
    failures(make_source(), fixed_now(), 2)
    evaluate.evaluate_all(fixed_now())

    html = staff.get("/").content.decode()
    top = html[html.index('id="open-incidents"'):]
    assert f"Failed {SHOWN_RLO}deliveries{SHOWN_ALM}" in top[: top.index("</table>")]
    assert RLO not in html and ALM not in html


def test_it_shows_the_arabic_letter_mark_in_mail_subjects_and_channel_texts() -> None:
    rule = make_rule(name=f"Failed{ALM} deliveries")
    rule.channels.add(slack_channel())
    failures(make_source(), fixed_now(), 2, error=f"connect{ALM} ECONNREFUSED")
    evaluate.evaluate_all(fixed_now())

    mail = Notification.objects.get(kind=NotificationKind.OPENED)
    assert f"connect{SHOWN_ALM} ECONNREFUSED" in mail.subject
    assert f"Failed{SHOWN_ALM} deliveries" in mail.body_text
    assert ALM not in mail.subject + mail.body_text + mail.body_html
    message = ChannelMessage.objects.get(kind=NotificationKind.OPENED)
    assert f"Failed{SHOWN_ALM} deliveries" in message.payload["text"]


def test_it_shows_a_note_in_the_admins_incident_timeline(staff: Client) -> None:
    make_rule()
    failures(make_source(), fixed_now(), 2)
    evaluate.evaluate_all(fixed_now())
    incident = Incident.objects.get()
    staff.post(f"/alerts/incidents/{incident.pk}/notes/", {"text": f"rolled back {RLO}evil{ZWSP} deploy"})

    html = staff.get(f"/admin/alerts/incident/{incident.pk}/change/").content.decode()
    assert f"rolled back {SHOWN_RLO}evil{SHOWN_ZWSP} deploy" in html
    assert RLO not in html and ZWSP not in html


def test_it_shows_the_rule_name_in_the_admins_channel_delivery_payload(staff: Client) -> None:
    make_rule(name=f"Failed {RLO}deliveries")
    failures(make_source(), fixed_now(), 2)
    evaluate.evaluate_all(fixed_now())
    delivery = channels.create_test(slack_channel(), fixed_now())
    # Whatever fields the payload carries, every string in it is shown made visible.
    payload = {**delivery.payload, "rule": f"Failed {RLO}deliveries", "incident": {"note": f"x{ZWSP}y"}}
    ChannelMessage.objects.filter(pk=delivery.pk).update(payload=payload)

    html = staff.get(f"/admin/alerts/channelmessage/{delivery.pk}/change/").content.decode()
    assert f"Failed {SHOWN_RLO}deliveries" in html and f"x{SHOWN_ZWSP}y" in html
    assert RLO not in html and ZWSP not in html
    delivery.refresh_from_db()
    assert delivery.payload["rule"] == f"Failed {RLO}deliveries"
