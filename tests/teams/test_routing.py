"""Alert routing per team, end to end: failures on two teams' streams open an incident each; each team's
channel (a real receiver on loopback) and addresses (a real SMTP server on loopback) get their own streams'
incidents and nothing of the other's, even when a rule names the other team's channel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.accounts.models import Team
from dashboard.alerts import channels, evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Channel, ChannelKind, Incident
from tests.alerts.factories import failures, fixed_now, make_rule, make_source
from tests.alerts.receiver import Receiver, receiver
from tests.alerts.smtp import Sink, smtp_sink
from tests.alerts.test_channels import send_due

pytestmark = pytest.mark.django_db

ALPHA = "a1a1a1a1-0000-4000-8000-0000000000aa"
BRAVO = "b2b2b2b2-0000-4000-8000-0000000000bb"


@pytest.fixture(autouse=True)
def no_default_rules(db: None) -> None:
    from dashboard.alerts.models import AlertRule

    AlertRule.objects.all().delete()


@pytest.fixture
def sink(settings: Any) -> Iterator[Sink]:
    with smtp_sink() as running:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", running.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        settings.SITE_URL = "https://dash.example.com"
        yield running


@pytest.fixture
def server() -> Iterator[Receiver]:
    with receiver() as running:
        yield running


def channel(name: str, url: str, team: Team | None) -> Channel:
    made = Channel(name=name, kind=ChannelKind.WEBHOOK, team=team)
    channels.store_settings(made, url=url, secret="whsec-0123456789abcdef")
    made.save()
    return made


def test_each_team_hears_of_its_own_streams_only(server: Receiver, sink: Sink) -> None:
    now = fixed_now()
    alpha = Team.objects.create(name="Alpha", stream_ids=[ALPHA], alert_emails="alpha-oncall@example.com")
    bravo = Team.objects.create(name="Bravo", tag_patterns=["bravo-*"], alert_emails="bravo-oncall@example.com")
    alpha_hook = channel("alpha hook", server.url + "/alpha", alpha)
    channel("bravo hook", server.url + "/bravo", bravo)
    ops_hook = channel("ops hook", server.url + "/ops", None)
    # One rule over everything naming Alpha's channel and the ops channel: Bravo's incident must still not
    # reach Alpha's channel.
    rule = make_rule(recipients="ops@example.com")
    rule.channels.set([alpha_hook, ops_hook])
    source = make_source()
    failures(source, now, 3, stream_id=ALPHA, tag="alpha-orders", webhook_url="https://alpha.example.com/in")
    failures(source, now, 3, stream_id=BRAVO, tag="bravo-payments", webhook_url="https://bravo.example.com/in")

    evaluate.evaluate_all(now)
    assert set(Incident.objects.values_list("stream_id", flat=True)) == {ALPHA, BRAVO}
    send_due(now)
    for notification_id in MAIL.due(now):
        MAIL.send(notification_id, now)

    by_path: dict[str, list[str]] = {}
    for request in server.accepted():
        by_path.setdefault(request.path, []).append(request.body.decode())
    assert len(by_path["/alpha"]) == 1 and ALPHA in by_path["/alpha"][0]
    assert len(by_path["/bravo"]) == 1 and BRAVO in by_path["/bravo"][0]
    assert len(by_path["/ops"]) == 2
    for body in by_path["/alpha"]:
        assert BRAVO not in body and "bravo" not in body
    for body in by_path["/bravo"]:
        assert ALPHA not in body and "alpha" not in body

    mails: dict[str, list[str]] = {}
    for message, (_sender, recipients) in zip(sink.messages, sink.envelopes, strict=True):
        parts = [message["Subject"], *(part.get_content() for part in message.walk() if part.get_content_maintype() == "text")]
        text = "\n".join(parts)
        for address in recipients:
            mails.setdefault(address, []).append(text)
    assert len(mails["ops@example.com"]) == 2
    assert len(mails["alpha-oncall@example.com"]) == 1 and len(mails["bravo-oncall@example.com"]) == 1
    # What a team's mail says and links to is its own stream only.
    assert ALPHA in mails["alpha-oncall@example.com"][0] and BRAVO not in mails["alpha-oncall@example.com"][0]
    assert "bravo" not in mails["alpha-oncall@example.com"][0].lower()
    assert BRAVO in mails["bravo-oncall@example.com"][0] and ALPHA not in mails["bravo-oncall@example.com"][0]
