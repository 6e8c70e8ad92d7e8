"""Admin actions on alert rules and incidents."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.alerts import evaluate
from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationKind, NotificationStatus
from tests.alerts.factories import failures, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db


def act(client: Client, model: str, action: str, pks: list[int]) -> None:
    response = client.post(
        f"/admin/alerts/{model}/",
        {"action": action, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )
    assert response.status_code == 200


def test_mute_for_a_day_and_unmute(staff: Client) -> None:
    rule = make_rule()

    act(staff, "alertrule", "mute_1440", [rule.pk])
    rule.refresh_from_db()
    assert rule.muted_until is not None and rule.muted_until > timezone.now()

    act(staff, "alertrule", "unmute", [rule.pk])
    rule.refresh_from_db()
    assert rule.muted_until is None


def test_send_a_test_mail(staff: Client, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    rule = make_rule()
    with django_capture_on_commit_callbacks() as callbacks:
        act(staff, "alertrule", "send_test_mail", [rule.pk])
    assert Notification.objects.get(kind=NotificationKind.TEST).recipients == rule.recipient_list()
    assert len(callbacks) == 1


def test_resolve_an_incident(staff: Client, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    now = fixed_now()
    make_rule()
    failures(make_source(), now, 1)
    evaluate.evaluate_all(now)
    incident = Incident.objects.get()

    with django_capture_on_commit_callbacks():
        act(staff, "incident", "resolve", [incident.pk])

    incident.refresh_from_db()
    assert incident.resolved_by == "sam"
    resolution = Notification.objects.get(kind=NotificationKind.RESOLVED)
    assert resolution.status == NotificationStatus.PENDING


def test_the_rule_form_checks_scope_and_recipients(staff: Client) -> None:
    response = staff.post(
        "/admin/alerts/alertrule/add/",
        {
            "name": "Bad",
            "enabled": "on",
            "recipients": "not-an-address",
            "digest": "off",
            "scope": "stream",
            "scope_value": "",
            "condition": "any_failure",
            "window_minutes": 15,
            "threshold_percent": 50,
            "min_deliveries": 10,
            "consecutive_failures": 5,
            "stale_minutes": 10,
            "grace_minutes": 10,
            "cooldown_minutes": 30,
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Enter a valid email address" in page
    assert not AlertRule.objects.filter(name="Bad").exists()


def test_the_admin_pages_render(staff: Client) -> None:
    now = fixed_now()
    make_rule()
    failures(make_source(), now, 1)
    evaluate.evaluate_all(now)
    for path in ("alertrule", "incident", "notification"):
        assert staff.get(f"/admin/alerts/{path}/").status_code == 200
    assert staff.get(f"/admin/alerts/incident/{Incident.objects.get().pk}/change/").status_code == 200
