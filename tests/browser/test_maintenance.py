"""A maintenance window keeps a rule quiet, seen in the browser: a window for a failing stream made in the admin (a
bad cron expression first refused with the reason), then the rule's evaluation opens nothing and mails nobody,
the stream page says it is in maintenance and the maintenance page lists the window."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail as outbox
from django.utils import timezone

from dashboard.alerts import evaluate
from dashboard.alerts.models import AlertRule, Incident, Notification
from dashboard.expectations.models import MaintenanceWindow
from tests.alerts.factories import STREAM, failures, make_rule, make_source
from tests.browser.fixtures import screenshot

pytestmark = pytest.mark.browser


def test_a_maintenance_window_keeps_a_rule_quiet(page: Any) -> None:
    now = timezone.now().replace(microsecond=0)
    AlertRule.objects.all().delete()
    make_rule()
    failures(make_source(), now, 6)

    page.goto("/admin/expectations/maintenancewindow/add/")
    page.fill("#id_name", "Receiver upgrade")
    page.select_option("#id_scope", "stream")
    page.fill("#id_scope_value", STREAM)
    page.fill("#id_cron", "61 * * * *")
    page.fill("#id_duration_minutes", "120")
    page.fill("#id_time_zone", "Europe/Berlin")
    page.click("input[name=_save]")
    assert "Not a cron expression (minute hour day month weekday): Bad minute." in page.locator(".errorlist").inner_text()
    assert not MaintenanceWindow.objects.exists()
    page.fill("#id_cron", "* * * * *")
    page.click("input[name=_save]")
    page.get_by_text("was added successfully").wait_for()

    assert evaluate.evaluate_all(timezone.now()) == []
    assert not Incident.objects.exists() and not Notification.objects.exists()
    assert outbox.outbox == []

    page.goto(f"/streams/{STREAM}/")
    banner = page.locator("#maintenance-banner")
    assert "In maintenance until" in banner.inner_text() and "Receiver upgrade" in banner.inner_text()
    screenshot(page, "stream-in-maintenance")
    page.goto("/maintenance/")
    assert "Receiver upgrade" in page.locator("#maintenance-active").inner_text()
    screenshot(page, "maintenance-windows")

    MaintenanceWindow.objects.all().delete()
    evaluate.evaluate_all(timezone.now())
    assert Incident.objects.get().stream_id == STREAM
