"""Working an incident: acknowledge, assign, notes, snooze; the timeline; digests leave attended incidents out."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail as outbox
from django.test import Client

from dashboard.accounts.roles import STAFF, VIEWERS, assign_role
from dashboard.actions.models import ActionKind, ActionState, ProviderAction
from dashboard.alerts import evaluate, workflow
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Incident, IncidentEvent, IncidentEventKind
from tests.alerts.factories import STREAM, failures, fixed_now, make_rule, make_source
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script> rolled back the deploy'


def login(username: str, role: str) -> tuple[User, Client]:
    user = make_user(username, role=None)
    assign_role(user, role)
    http = Client()
    http.force_login(user)
    return user, http


@pytest.fixture
def staff() -> Client:
    return login("sam", STAFF)[1]


def open_incident(now: datetime | None = None, **rule_fields: object) -> Incident:
    now = now or fixed_now()
    make_rule(**rule_fields)
    failures(make_source(), now, 2)
    evaluate.evaluate_all(now)
    return Incident.objects.get()


def page(client: Client, incident: Incident) -> str:
    response = client.get(f"/alerts/incidents/{incident.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_acknowledge_records_who_and_when_once(staff: Client) -> None:
    incident = open_incident()
    response = staff.post(f"/alerts/incidents/{incident.pk}/acknowledge/")
    assert response.status_code == 302
    staff.post(f"/alerts/incidents/{incident.pk}/acknowledge/")

    incident.refresh_from_db()
    assert incident.acknowledged_by == "sam" and incident.acknowledged_at is not None
    assert IncidentEvent.objects.filter(kind=IncidentEventKind.ACKNOWLEDGED).count() == 1
    html = page(staff, incident)
    assert "UTC by sam" in html
    assert f'action="/alerts/incidents/{incident.pk}/acknowledge/"' not in html


def test_assign_to_staff_only(staff: Client) -> None:
    incident = open_incident()
    olga, _ = login("olga", STAFF)
    vera, _ = login("vera", VIEWERS)

    assert staff.post(f"/alerts/incidents/{incident.pk}/assign/", {"assignee": olga.pk}).status_code == 302
    incident.refresh_from_db()
    assert incident.assignee == olga

    response = staff.post(f"/alerts/incidents/{incident.pk}/assign/", {"assignee": vera.pk})
    assert response.status_code == 400
    assert "Choose a staff member" in response.content.decode()
    assert staff.post(f"/alerts/incidents/{incident.pk}/assign/", {"assignee": "x"}).status_code == 400

    staff.post(f"/alerts/incidents/{incident.pk}/assign/", {"assignee": ""})
    incident.refresh_from_db()
    assert incident.assignee is None
    assert list(IncidentEvent.objects.values_list("text", flat=True)) == ["to olga", "unassigned"]


def test_notes_and_the_timeline(staff: Client) -> None:
    now = fixed_now()
    incident = open_incident(now)
    workflow.acknowledge(incident, "sam", now + timedelta(minutes=1))
    assert staff.post(f"/alerts/incidents/{incident.pk}/notes/", {"text": HOSTILE}).status_code == 302
    assert staff.post(f"/alerts/incidents/{incident.pk}/notes/", {"text": "   "}).status_code == 400
    assert staff.post(f"/alerts/incidents/{incident.pk}/notes/", {"text": "x" * 5001}).status_code == 400
    ProviderAction.objects.create(
        kind=ActionKind.REPLAY,
        state=ActionState.DONE,
        requested_by_name="olga",
        stream_id=STREAM,
        scope="2 failed deliveries of stream orders",
        answer="2 replayed, 2 delivered",
        created_at=now + timedelta(minutes=2),
        finished_at=now + timedelta(minutes=3),
    )
    evaluate.resolve_incident(incident, now + timedelta(hours=2), by="sam")

    html = page(staff, incident)
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; rolled back the deploy" in html
    assert '<script>alert("x")' not in html
    timeline = html[html.index("<h2>Timeline</h2>"):]
    order = [timeline.index(w) for w in ("Opened", "rolled back", "Acknowledged", "Replay deliveries (done)", "Resolved")]
    assert order == sorted(order)
    assert "2 replayed, 2 delivered" in timeline


def test_snooze_and_end_it(staff: Client) -> None:
    incident = open_incident()
    assert staff.post(f"/alerts/incidents/{incident.pk}/snooze/", {"minutes": "7"}).status_code == 400
    assert staff.post(f"/alerts/incidents/{incident.pk}/snooze/", {"minutes": "240"}).status_code == 302
    incident.refresh_from_db()
    assert incident.snoozed_until is not None
    assert "Snoozed until" in page(staff, incident)
    staff.post(f"/alerts/incidents/{incident.pk}/unsnooze/")
    incident.refresh_from_db()
    assert incident.snoozed_until is None
    assert list(IncidentEvent.objects.values_list("kind", flat=True)) == ["snoozed", "unsnoozed"]


def test_viewers_cannot_change_an_incident_and_gets_are_refused() -> None:
    incident = open_incident()
    _, viewer = login("vera", VIEWERS)
    for action in ("acknowledge", "assign", "notes", "snooze", "unsnooze"):
        assert viewer.post(f"/alerts/incidents/{incident.pk}/{action}/", {"text": "x", "minutes": 60}).status_code == 403
    assert "Acknowledge</button>" not in page(viewer, incident)
    _, staff = login("sam", STAFF)
    assert staff.get(f"/alerts/incidents/{incident.pk}/acknowledge/").status_code == 405
    assert Client().post(f"/alerts/incidents/{incident.pk}/acknowledge/").status_code == 302  # to the login
    incident.refresh_from_db()
    assert incident.acknowledged_at is None and not IncidentEvent.objects.exists()


def test_posts_need_the_csrf_token() -> None:
    incident = open_incident()
    user, _ = login("sam", STAFF)
    http = Client(enforce_csrf_checks=True)
    http.force_login(user)
    assert http.post(f"/alerts/incidents/{incident.pk}/acknowledge/").status_code == 403
    incident.refresh_from_db()
    assert incident.acknowledged_at is None


def run(now: datetime) -> None:
    for notification_id in evaluate.sweep(now):
        MAIL.send(notification_id, now)


def test_the_digest_stops_nagging_about_acknowledged_and_snoozed_incidents() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(digest="hourly", window_minutes=24 * 60)
    rule.created_at = now - timedelta(minutes=50)
    rule.save()
    failures(source, now, 1)
    failures(source, now, 1, stream_id="00000000-0000-4000-8000-000000000009", tag="other")
    run(now)
    assert len(outbox.outbox) == 2
    orders = Incident.objects.get(label="orders")
    other = Incident.objects.get(label="other")
    workflow.acknowledge(orders, "sam", now)

    run(now + timedelta(minutes=11))
    digest = outbox.outbox[-1]
    assert digest.subject == f"[DIGEST] {rule.name}: 1 still failing"
    assert "stream other" in digest.body and "stream orders" not in digest.body
    assert "1 more open incident acknowledged or snoozed, not listed." in digest.body

    # Both attended to: the next hour's digest has nothing to nag about and is not sent.
    workflow.snooze(other, 180, "sam", now + timedelta(minutes=20))
    run(now + timedelta(minutes=72))
    assert len(outbox.outbox) == 3

    # The snooze ends: the digest lists the incident again.
    run(now + timedelta(minutes=210))
    assert len(outbox.outbox) == 4
    assert "stream other" in outbox.outbox[-1].body and "stream orders" not in outbox.outbox[-1].body


def test_the_admin_acknowledges_and_shows_the_timeline(staff: Client) -> None:
    incident = open_incident()
    workflow.add_note(incident, "looking at the load balancer", "olga")
    user = make_user("root", staff=True)
    admin = Client()
    admin.force_login(user)
    admin.post("/admin/alerts/incident/", {"action": "acknowledge", "_selected_action": [str(incident.pk)]})
    incident.refresh_from_db()
    assert incident.acknowledged_by == "root"
    html = admin.get(f"/admin/alerts/incident/{incident.pk}/change/").content.decode()
    assert "looking at the load balancer" in html and "Acknowledged" in html
    assert "root" in admin.get("/admin/alerts/incident/").content.decode()


def test_the_incident_list_shows_who_acknowledged_assigned_and_snoozed(staff: Client) -> None:
    now = fixed_now()
    olga, _ = login("olga", STAFF)
    make_rule()
    source = make_source()
    failures(source, now, 2)
    failures(source, now, 2, stream_id="0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", tag="refunds")
    evaluate.evaluate_all(now)
    first, second = Incident.objects.order_by("target_key")
    workflow.acknowledge(first, "sam")
    workflow.assign(first, olga, "sam")
    workflow.snooze(second, 240, "sam")

    response = staff.get("/alerts/")
    html = response.content.decode()
    open_list = html[html.index("Open incidents"):html.index("Recently resolved")]
    assert "acknowledged by sam" in open_list
    assert "assigned to olga" in open_list
    second.refresh_from_db()
    assert f"snoozed until {second.snoozed_until:%Y-%m-%d %H:%M}" in open_list
