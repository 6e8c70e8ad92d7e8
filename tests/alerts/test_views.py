"""The alerts page: rules with their state for viewers, changing actions for staff only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail as outbox
from django.test import Client
from django.utils import timezone

from dashboard.accounts.roles import STAFF, VIEWERS, assign_role
from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Incident, Notification, NotificationKind
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.status import DeliveryStatus
from tests.alerts.factories import HOSTILE_ERROR, failures, fixed_now, make_rule, make_source
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def client_for(role: str) -> Client:
    user: User = make_user("vera" if role == VIEWERS else "sam")
    assign_role(user, role)
    http = Client()
    http.force_login(user)
    return http


@pytest.fixture
def viewer() -> Client:
    return client_for(VIEWERS)


@pytest.fixture
def staff() -> Client:
    return client_for(STAFF)


def open_incident() -> Incident:
    now = fixed_now()
    make_rule()
    failures(make_source(), now, 2, error=HOSTILE_ERROR)
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    return Incident.objects.get()


def test_it_requires_login() -> None:
    response = Client().get("/alerts/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_lists_rules_with_their_state(viewer: Client) -> None:
    incident = open_incident()
    make_rule("Quiet rule", condition="consecutive", muted_until=timezone.now() + timedelta(hours=1))

    response = viewer.get("/alerts/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Failed deliveries" in page and "1 open" in page
    assert "Quiet rule" in page and "muted until" in page
    assert f"/alerts/incidents/{incident.pk}/" in page
    # Viewers see no changing actions.
    assert "/mute/" not in page and "Test mail" not in page
    assert "<script>alert" not in page


def test_viewers_cannot_change_anything(viewer: Client) -> None:
    incident = open_incident()
    rule = incident.rule

    assert viewer.post(f"/alerts/rules/{rule.pk}/mute/", {"minutes": 60}).status_code == 403
    assert viewer.post(f"/alerts/rules/{rule.pk}/test/").status_code == 403
    assert viewer.post(f"/alerts/incidents/{incident.pk}/resolve/").status_code == 403
    rule.refresh_from_db()
    assert rule.muted_until is None
    assert Incident.objects.get().is_open


def test_staff_mute_and_unmute_a_rule(staff: Client) -> None:
    rule = make_rule()

    response = staff.post(f"/alerts/rules/{rule.pk}/mute/", {"minutes": 240})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.muted_until is not None
    assert timedelta(hours=3, minutes=59) < rule.muted_until - timezone.now() <= timedelta(hours=4)

    staff.post(f"/alerts/rules/{rule.pk}/unmute/")
    rule.refresh_from_db()
    assert rule.muted_until is None


def test_a_bad_mute_period_is_a_400(staff: Client) -> None:
    rule = make_rule()
    assert staff.post(f"/alerts/rules/{rule.pk}/mute/", {"minutes": "forever"}).status_code == 400


def test_staff_send_a_test_mail(staff: Client, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    rule = make_rule()

    with django_capture_on_commit_callbacks() as callbacks:
        response = staff.post(f"/alerts/rules/{rule.pk}/test/")
    assert response.status_code == 302
    notification = Notification.objects.get(kind=NotificationKind.TEST)
    assert len(callbacks) == 1  # the send task, queued once committed
    MAIL.send(notification.pk)
    assert outbox.outbox[-1].subject == '[TEST] Alert rule "Failed deliveries"'


def test_staff_resolve_an_incident(staff: Client, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    incident = open_incident()

    with django_capture_on_commit_callbacks():
        staff.post(f"/alerts/incidents/{incident.pk}/resolve/")

    incident.refresh_from_db()
    assert incident.resolved_by == "sam"
    assert Notification.objects.filter(incident=incident, kind=NotificationKind.RESOLVED).count() == 1


def test_the_mail_page_shows_what_was_sent_escaped(viewer: Client) -> None:
    incident = open_incident()
    notification = incident.notifications.get()

    response = viewer.get(f"/alerts/notifications/{notification.pk}/")

    page = response.content.decode()
    assert response.status_code == 200
    assert notification.message_id.replace("<", "&lt;").replace(">", "&gt;") in page
    assert "<script>alert" not in page
    assert "sandbox" in page


def test_the_incident_page(viewer: Client) -> None:
    incident = open_incident()
    response = viewer.get(f"/alerts/incidents/{incident.pk}/")
    assert response.status_code == 200
    assert "connect ECONNREFUSED" in response.content.decode() or "status code" in response.content.decode()


def test_the_incident_page_links_to_the_failing_deliveries(viewer: Client) -> None:
    incident = open_incident()
    page = viewer.get(f"/alerts/incidents/{incident.pk}/").content.decode()
    assert f'href="/deliveries/?stream={incident.stream_id}&amp;status=failing"' in page
    listed = viewer.get(f"/deliveries/?stream={incident.stream_id}&status=failing").content.decode()
    assert all(f'href="/deliveries/{f["id"]}/"' in listed for f in incident.details["first_failures"])


@pytest.mark.parametrize("name", ["incident_opened", "incident_resolved", "digest", "test"])
def test_staff_preview_each_mail(staff: Client, name: str) -> None:
    response = staff.get(f"/alerts/preview/{name}/")
    assert response.status_code == 200
    assert "hooks.example.com" in response.content.decode() or name == "test"


def test_previews_are_for_staff(viewer: Client) -> None:
    assert viewer.get("/alerts/preview/digest/").status_code == 403


def test_the_incident_page_links_to_its_stream_and_offers_a_replay_to_those_who_may_act(
    viewer: Client, staff: Client
) -> None:
    incident = open_incident()
    url = f"/alerts/incidents/{incident.pk}/"
    seen = viewer.get(url).content.decode()
    assert f'href="/streams/{incident.stream_id}/"' in seen
    assert 'id="replay-failures"' not in seen and "Replay failures" not in seen

    page = staff.get(url).content.decode()
    assert 'id="replay-failures"' in page and "Replay failures…" in page
    filters = f"stream={incident.stream_id}&amp;status=failing"
    assert f'<input type="hidden" name="filters" value="{filters}">' in page
    # The button leads into the replay's prepare flow, which names the stream's failing deliveries to confirm.
    prepared = staff.post("/actions/replay/", {"filters": filters.replace("&amp;", "&")})
    assert prepared.status_code == 302 and prepared["Location"].startswith("/actions/")


def test_the_incident_page_says_retries_stopped_for_a_stream_not_active_at_the_provider(viewer: Client) -> None:
    from dashboard.deliveries.models import Stream

    incident = open_incident()
    url = f"/alerts/incidents/{incident.pk}/"
    assert "retries stopped" not in viewer.get(url).content.decode()
    Stream.objects.filter(stream_id=incident.stream_id).update(provider_status="terminated")
    assert "retries stopped: stream terminated at the provider" in viewer.get(url).content.decode()


@pytest.mark.parametrize("name", ["incident_opened", "incident_resolved", "digest"])
def test_the_mail_previews_figures_agree_and_placeholders_show(staff: Client, name: str) -> None:
    from dashboard.alerts.mail import preview

    mail = preview(name)
    # 42 failures in the condition, 40 + 2 in the error groups, 32 still failing + 10 recovered in the impact.
    assert "42 failed deliveries" in mail.text
    assert "40 × connect ECONNREFUSED <ip>" in mail.text or "40</td>" in mail.html
    text = " ".join(mail.text.split()).lower()
    assert "failed so far 42" in text.replace(":", ""), text
    assert "failing now 32" in text.replace(":", ""), text
    # The masked parts of an error template show as such on the page, not as an empty gap read as markup.
    page = staff.get(f"/alerts/preview/{name}/").content.decode()
    assert "timeout of &lt;duration&gt; exceeded" in page
    assert "timeout of <duration> exceeded" not in page


def test_an_incident_with_nothing_failing_offers_no_replay(staff: Client) -> None:
    incident = open_incident()
    url = f"/alerts/incidents/{incident.pk}/"
    assert 'id="replay-failures"' in staff.get(url).content.decode()
    # Every failure of the incident was delivered since (a replay, the provider's retries).
    Delivery.objects.filter(stream_id=incident.stream_id).update(status=DeliveryStatus.DELIVERED, error_message="")
    assert 'id="replay-failures"' not in staff.get(url).content.decode()
