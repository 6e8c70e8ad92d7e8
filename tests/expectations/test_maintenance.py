"""Maintenance windows: a recurring window's occurrences keep their local time across daylight saving in their
zone, which windows cover which targets, the stretches of a past range they covered, and the checks of the
admin's form (a bad cron expression or zone is a form error)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from dashboard.expectations.maintenance import (
    Maintenance,
    Target,
    in_maintenance,
    intervals,
    occurrences,
    schedule,
)
from dashboard.expectations.models import MaintenanceWindow

pytestmark = pytest.mark.django_db

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def recurring(cron: str = "0 3 * * *", zone: str = "Europe/Berlin", minutes: int = 60, **fields: Any) -> MaintenanceWindow:
    fields.setdefault("scope", "all")
    window = MaintenanceWindow(name="Nightly", cron=cron, time_zone=zone, duration_minutes=minutes, **fields)
    window.full_clean()
    window.save()
    return window


def test_a_recurring_window_keeps_its_local_time_across_daylight_saving() -> None:
    window = recurring()
    # Autumn: 03:00 CEST is 01:00 UTC until 25 October 2026, 03:00 CET is 02:00 UTC from then on.
    starts = [o.start.astimezone(UTC) for o in occurrences(window, utc(2026, 10, 23), utc(2026, 10, 27))]
    assert starts == [utc(2026, 10, 23, 1), utc(2026, 10, 24, 1), utc(2026, 10, 25, 2), utc(2026, 10, 26, 2)]
    assert in_maintenance(Target(STREAM), utc(2026, 10, 24, 1, 30))
    assert not in_maintenance(Target(STREAM), utc(2026, 10, 25, 1, 30))
    assert in_maintenance(Target(STREAM), utc(2026, 10, 25, 2, 30))
    # Spring: 02:30 does not exist on 29 March 2026 in Berlin; cron runs it at 03:00 CEST, 01:00 UTC.
    window.cron = "30 2 * * *"
    window.save()
    starts = [o.start.astimezone(UTC) for o in occurrences(window, utc(2026, 3, 28), utc(2026, 3, 31))]
    assert starts == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]
    # Each lasts its 60 minutes of elapsed time, whatever the clock did.
    assert all(o.end - o.start == timedelta(hours=1) for o in occurrences(window, utc(2026, 3, 28), utc(2026, 3, 31)))


def test_an_occurrence_under_way_at_the_range_start_is_included_and_one_ended_is_not() -> None:
    window = recurring(cron="0 * * * *", zone="UTC", minutes=30)
    found = list(occurrences(window, utc(2026, 1, 1, 10, 15), utc(2026, 1, 1, 11, 45)))
    assert [(o.start, o.end) for o in found] == [
        (utc(2026, 1, 1, 10), utc(2026, 1, 1, 10, 30)), (utc(2026, 1, 1, 11), utc(2026, 1, 1, 11, 30))
    ]
    assert not list(occurrences(window, utc(2026, 1, 1, 10, 30), utc(2026, 1, 1, 10, 59)))


def test_which_targets_a_window_covers() -> None:
    now = utc(2026, 1, 1, 12)
    MaintenanceWindow.objects.create(name="Tag", scope="tag", scope_value="orders", starts_at=now - timedelta(hours=1),
                                     ends_at=now + timedelta(hours=1))
    maintenance = Maintenance.at(now)
    assert maintenance.covers(Target(STREAM, "orders"))
    assert not maintenance.covers(Target(STREAM, "payouts"))
    # A source has no stream: only a window for everything covers it.
    assert not maintenance.covers(Target())
    assert not Maintenance.at(now + timedelta(hours=1)).covers(Target(STREAM, "orders"))


def test_the_stretches_of_a_range_a_window_covered_are_merged() -> None:
    recurring(cron="0 */2 * * *", zone="UTC", minutes=180, scope="stream", scope_value=STREAM)
    MaintenanceWindow.objects.create(name="Once", scope="stream", scope_value=STREAM, starts_at=utc(2026, 1, 2, 5),
                                     ends_at=utc(2026, 1, 2, 6))
    assert intervals(Target(STREAM, ""), utc(2026, 1, 1, 1), utc(2026, 1, 1, 5)) == [
        (utc(2026, 1, 1, 1), utc(2026, 1, 1, 5))
    ]
    assert intervals(Target("another", ""), utc(2026, 1, 1), utc(2026, 1, 3)) == []


def test_the_schedule_lists_what_is_active_and_what_comes_next() -> None:
    now = utc(2026, 1, 5, 3, 30)  # a Monday
    recurring(cron="0 3 * * 1", zone="UTC", minutes=60)
    MaintenanceWindow.objects.create(name="Once", scope="all", starts_at=now + timedelta(days=2),
                                     ends_at=now + timedelta(days=2, hours=1))
    MaintenanceWindow.objects.create(name="Past", scope="all", starts_at=now - timedelta(days=2),
                                     ends_at=now - timedelta(days=1))
    active, upcoming = schedule(now)
    assert [(o.window.name, o.start) for o in active] == [("Nightly", utc(2026, 1, 5, 3))]
    # The next occurrence of each window, the active one's too.
    assert [(o.window.name, o.start) for o in upcoming] == [
        ("Once", now + timedelta(days=2)), ("Nightly", utc(2026, 1, 12, 3))
    ]


@pytest.fixture
def admin_client_() -> Client:
    from tests.conftest import make_user

    http = Client()
    http.force_login(make_user("root", staff=True))
    return http


def add_form(**fields: str) -> dict[str, str]:
    form = {"name": "Nightly", "scope": "all", "scope_value": "", "reason": "", "starts_at_0": "", "starts_at_1": "",
            "ends_at_0": "", "ends_at_1": "", "cron": "0 3 * * *", "duration_minutes": "60", "time_zone": "UTC"}
    form.update(fields)
    return form


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"cron": "61 * * * *"}, "Not a cron expression (minute hour day month weekday): Bad minute."),
        ({"cron": "0 3 * *"}, "Not a cron expression (minute hour day month weekday): Wrong number of fields."),
        ({"time_zone": "Mars/Olympus"}, "No time zone is called “Mars/Olympus”"),
        ({"duration_minutes": ""}, "How long each occurrence lasts, in minutes."),
        ({"scope": "stream"}, "Name the stream id or tag."),
        ({"cron": "", "starts_at_0": "2026-01-02", "starts_at_1": "10:00", "ends_at_0": "2026-01-02",
          "ends_at_1": "09:00", "duration_minutes": ""}, "The end comes after the start."),
    ],
)
def test_the_admin_form_says_what_is_wrong(admin_client_: Client, fields: dict[str, str], error: str) -> None:
    response = admin_client_.post("/admin/expectations/maintenancewindow/add/", add_form(**fields))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not MaintenanceWindow.objects.exists()


def test_the_admin_saves_a_recurring_window_with_who_made_it(admin_client_: Client) -> None:
    response = admin_client_.post("/admin/expectations/maintenancewindow/add/", add_form(cron=" 0  3 * * 0 "))
    assert response.status_code == 302
    window = MaintenanceWindow.objects.get()
    assert (window.cron, window.created_by) == ("0 3 * * 0", "root")
    assert window.describe_schedule() == "At 03:00 on Sunday (UTC), for 60 min"
