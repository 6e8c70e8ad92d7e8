"""Quiet streams: a stream's expected volume learned per hour of the week from its hourly rollups, and the
quiet_stream condition: a dense stream that stops opens an incident and resolves when deliveries return; a
sparse stream is not quiet after an hour; no verdict before two weeks of history; a maintenance window keeps it
quiet and its hours are left out of the baseline."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail as outbox
from django.core.cache import cache

from dashboard.alerts import evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import AlertRule, Condition, Incident
from dashboard.deliveries.models import HourlyRollup, Stream
from dashboard.expectations.models import MaintenanceWindow
from dashboard.expectations.volume import baselines, hour_of_week, poisson_cdf, verdicts
from dashboard.sources.models import Source
from tests.alerts.factories import make_source

pytestmark = pytest.mark.django_db

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"
# A Wednesday, 20 minutes into the hour.
NOW = datetime(2026, 11, 25, 14, 20, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def fresh() -> None:
    cache.clear()
    AlertRule.objects.all().delete()


def history(source: Source, hours: Iterable[tuple[datetime, int]], *, tag: str = "orders") -> None:
    """Hourly rollup rows of delivered deliveries, and the stream's row with its first and last delivery."""
    rows = [
        HourlyRollup(source=source, hour=hour, stream_id=STREAM, tag=tag, webhook_url="https://hooks.example.com/m",
                     chain_id="0x1", status="delivered", deliveries=n, retries=0)
        for hour, n in hours if n
    ]
    HourlyRollup.objects.bulk_create(rows)
    first, last = min(r.hour for r in rows), max(r.hour for r in rows) + timedelta(minutes=59)
    Stream.objects.update_or_create(source=source, stream_id=STREAM, defaults={
        "tag": tag, "first_delivery_at": first, "last_delivery_at": last, "webhook_urls": ["https://hooks.example.com/m"]})


def dense(until: datetime, days: int = 28, per_hour: int = 60) -> list[tuple[datetime, int]]:
    end = HourlyRollup.hour_of(until)
    return [(end - HOUR * i, per_hour) for i in range(1, days * 24 + 1)]


def run(now: datetime) -> None:
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)


def quiet_rule() -> AlertRule:
    return AlertRule.objects.create(name="Quiet", condition=Condition.QUIET_STREAM, recipients="ops@example.com",
                                    grace_minutes=10, cooldown_minutes=0)


def test_the_poisson_probability() -> None:
    assert poisson_cdf(0, 3) == pytest.approx(0.049787, rel=1e-4)
    assert poisson_cdf(2, 3) == pytest.approx(0.42319, rel=1e-4)
    assert poisson_cdf(5, 3) > 0.5  # at or above the mean: never improbably low
    assert poisson_cdf(9_000, 10_000) < 1e-20
    assert poisson_cdf(9_990, 10_000) == pytest.approx(0.462, abs=2e-3)


def test_a_dense_stream_that_stops_opens_an_incident_and_resolves_when_deliveries_return() -> None:
    source = make_source()
    # 60 an hour for four weeks, nothing since 12:00: two hours and twenty minutes of silence.
    history(source, dense(NOW - 2 * HOUR))
    quiet_rule()

    run(NOW)

    incident = Incident.objects.get()
    # Two hours and 21 minutes at 60 an hour.
    assert incident.details["seen"] == 0 and incident.details["expected"] == pytest.approx(141, abs=0.5)
    assert incident.summary.startswith("stream orders: 0 deliveries since 2026-11-25 11:59 UTC where ~141 were expected")
    assert outbox.outbox[0].subject.startswith("[QUIET] stream orders: 0 deliveries")

    # Deliveries return at the usual rate in the next hour.
    later = NOW + HOUR
    HourlyRollup.objects.create(source=source, hour=HourlyRollup.hour_of(later), stream_id=STREAM, tag="orders",
                                webhook_url="https://hooks.example.com/m", chain_id="0x1", status="delivered",
                                deliveries=20, retries=0)
    Stream.objects.filter(stream_id=STREAM).update(last_delivery_at=later - timedelta(minutes=1))
    run(later)
    # Still arriving at the usual rate when the grace period ends.
    HourlyRollup.objects.filter(hour=HourlyRollup.hour_of(later)).update(deliveries=31)
    Stream.objects.filter(stream_id=STREAM).update(last_delivery_at=later + timedelta(minutes=10))
    run(later + timedelta(minutes=11))
    incident.refresh_from_db()
    assert not incident.is_open
    assert [m.subject[:10] for m in outbox.outbox] == ["[QUIET] st", "[RESOLVED]"]


def test_a_sparse_stream_is_not_quiet_after_an_hour() -> None:
    source = make_source()
    end = HourlyRollup.hour_of(NOW)
    # Three deliveries a day, at 02:00, 10:00 and 18:00; the last at 10:00 today, four hours ago.
    history(source, [(end - HOUR * i, 1) for i in range(1, 28 * 24) if (end - HOUR * i).hour in (2, 10, 18)])
    quiet_rule()

    run(NOW)

    assert not Incident.objects.exists()
    verdict = verdicts(NOW)[STREAM]
    assert verdict.expected < 1 and verdict.cold == "fewer than 5 expected"


def test_no_verdict_before_two_weeks_of_history() -> None:
    source = make_source()
    history(source, dense(NOW - 2 * HOUR, days=10))
    quiet_rule()

    run(NOW)

    assert not Incident.objects.exists()
    assert verdicts(NOW)[STREAM].cold == "learning: 10 of 14 days of history"


def test_a_maintenance_window_keeps_a_stopped_stream_quiet_and_its_hours_leave_the_baseline() -> None:
    source = make_source()
    # Every day the stream is silent from 03:00 to 05:00 UTC, inside a recurring window.
    hours = [(hour, 0 if hour.hour in (3, 4) else n) for hour, n in dense(NOW - 2 * HOUR)]
    history(source, hours)
    MaintenanceWindow.objects.create(name="Nightly", scope="tag", scope_value="orders", cron="0 3 * * *",
                                     duration_minutes=120, time_zone="UTC")
    baseline = baselines(NOW)[STREAM]
    three = hour_of_week(datetime(2026, 11, 25, 3, tzinfo=UTC))
    assert baseline.weeks[three] == 0 and baseline.mean(three) == pytest.approx(60, abs=1)
    assert baseline.weeks[hour_of_week(NOW) - 1] == 4

    MaintenanceWindow.objects.create(name="Migration", scope="stream", scope_value=STREAM,
                                     starts_at=NOW - 3 * HOUR, ends_at=NOW + HOUR)
    quiet_rule()
    run(NOW)
    assert not Incident.objects.exists()


def test_the_hours_of_an_outage_leave_the_baseline_and_a_stream_not_active_is_not_quiet() -> None:
    from dashboard.deliveries.models import OutageWindow, WindowKind

    source = make_source()
    # Silent for a whole day ten days ago: the provider had the stream in error.
    down = HourlyRollup.hour_of(NOW - timedelta(days=10))
    hours = [(hour, 0 if down <= hour < down + timedelta(days=1) else n) for hour, n in dense(NOW - 2 * HOUR)]
    history(source, hours)
    stream = Stream.objects.get(stream_id=STREAM)
    OutageWindow.objects.create(stream=stream, kind=WindowKind.PROVIDER_STATUS, label="error",
                                start=down, end=down + timedelta(days=1))
    baseline = baselines(NOW)[STREAM]
    silent = hour_of_week(down + 3 * HOUR)
    # The outage's hours are not counted as a quiet normal week: three weeks of 60, not four with a zero.
    assert baseline.weeks[silent] == 3 and baseline.mean(silent) == pytest.approx(60)

    # Stopped two hours ago because the provider paused it: its own condition speaks, not the quiet one.
    Stream.objects.filter(pk=stream.pk).update(provider_status="paused")
    quiet_rule()
    run(NOW)
    assert not Incident.objects.exists()
    Stream.objects.filter(pk=stream.pk).update(provider_status="active")
    run(NOW)
    assert Incident.objects.filter(rule__condition=Condition.QUIET_STREAM).count() == 1


def test_deliveries_that_arrive_together_are_judged_in_units_of_their_dispersion() -> None:
    import random

    source = make_source()
    # Blocks arrive as a Poisson process of 15 an hour, each bringing its unconfirmed and its confirmed delivery:
    # 30 deliveries an hour whose hourly counts vary twice as much as a Poisson count of 30.
    draw = random.Random(7)

    def blocks(mean: float) -> int:
        n, t = 0, draw.expovariate(mean)
        while t < 1:
            n, t = n + 1, t + draw.expovariate(mean)
        return n

    end = HourlyRollup.hour_of(NOW)
    history(source, [(end - HOUR * i, 2 * blocks(15)) for i in range(1, 28 * 24 + 1)])
    baseline = baselines(NOW)[STREAM]
    assert 1.6 <= baseline.dispersion <= 2.5
    # Twelve minutes without a block happen about once a day at 15 blocks an hour (e^-3 ≈ 5 %): not quiet at 0.001,
    # where a Poisson count of deliveries (e^-6 ≈ 0.25 %) would be close to the threshold.
    expected = baseline.expected(NOW - timedelta(minutes=12), NOW)
    assert baseline.probability(0, expected) == pytest.approx(poisson_cdf(0, expected / baseline.dispersion))
    assert baseline.probability(0, expected) > 0.02
    # An hour of silence is still improbable: e^-15.
    assert baseline.probability(0, baseline.expected(NOW - HOUR, NOW)) < 1e-5
