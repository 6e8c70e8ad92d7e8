"""Service level objectives: the windows' counts (whole hours from the rollups, the edges from the rows) equal the
rows', the budget over the objectives' days with a stream's own objectives and maintenance hours left out, the
burn-rate conditions opening and resolving an incident, and the pages that show them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import mail as outbox
from django.core.cache import cache
from django.db.models import Q
from django.test import Client

from dashboard.alerts import conditions, evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import AlertRule, Condition, Incident, Scope
from dashboard.deliveries.latency import BOUNDS, count_within, histogram_of
from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.deliveries.status import DeliveryStatus
from dashboard.deliveries.trailing_counts import trailing_stream_counts
from dashboard.expectations import objectives
from dashboard.expectations.models import MaintenanceWindow, StreamObjective, WindowScope
from dashboard.sources.models import Source
from tests import factories
from tests.alerts.factories import HOOK, OTHER_STREAM, STREAM, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    cache.clear()


def record(date: datetime, *, latency: float = 2, error: str = "", retries: int = 0, stream_id: str = STREAM,
           tag: str = "orders", confirmed: bool = False) -> dict[str, Any]:
    payload = {"block": {"number": "1", "hash": "0x1", "timestamp": str(int(date.timestamp() - latency))},
               "chainId": "0x1", "logs": []}
    return factories.history_record(date=date, stream_id=stream_id, tag=tag, webhook_url=HOOK, confirmed=confirmed,
                                    error=error, retries=retries, payload=payload)


def test_the_share_within_a_latency_is_exact_at_a_bound_and_interpolated_between() -> None:
    histogram = histogram_of([500, 1_500, 4_000, 20_000, 45_000, 90_000])
    assert count_within(histogram, 5) == 3
    assert count_within(histogram, 60) == 5
    assert count_within(histogram, BOUNDS[-1] * 3) == 6
    assert count_within(histogram, 45) == pytest.approx(4.5)  # half of the (30, 60] bucket's one delivery
    assert count_within(histogram, 0) == 0


def test_each_window_counts_what_its_rows_count() -> None:
    now = fixed_now()
    source = make_source()
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    factories.store(
        source,
        *(record(ago(m), latency=m % 90) for m in range(1, 400, 3)),
        *(record(ago(m), error="HTTP 500", retries=2) for m in range(2, 400, 11)),
        *(record(ago(m), retries=1) for m in range(4, 400, 13)),
        *(record(ago(m), latency=700, confirmed=True) for m in range(5, 400, 17)),
        *(record(ago(m), stream_id=OTHER_STREAM, tag="payouts") for m in range(1, 400, 7)),
    )
    spans = [timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=1), timedelta(hours=6)]
    found = trailing_stream_counts(now, [now - span for span in spans])
    for span in spans:
        rows = Delivery.objects.chain_events().filter(date__gte=now - span, date__lte=now)
        for stream in (STREAM, OTHER_STREAM):
            mine = rows.filter(stream_id=stream)
            counts = found[now - span][stream]
            assert counts.total == mine.count()
            assert counts.failed == mine.exclude(status=DeliveryStatus.DELIVERED).count()
            assert counts.not_first == mine.filter(~Q(status=DeliveryStatus.DELIVERED) | Q(retries__gt=0)).count()
            assert counts.latency == histogram_of(mine.filter(confirmed=False).values_list("latency_ms", flat=True))
    # Narrowed to a tag: the other stream only.
    assert set(trailing_stream_counts(now, [now - spans[-1]], ("tag", "payouts"))[now - spans[-1]]) == {OTHER_STREAM}


def thirty_days(source: Source, now: datetime) -> None:
    """Orders: 400 deliveries over 20 days, 8 failed, 12 delivered after a retry, 20 slower than a minute."""
    current = HourlyRollup.hour_of(now)
    dates = [current - timedelta(hours=1 + n * 1.2) for n in range(400)]
    factories.store(
        source,
        *(record(d, error="HTTP 500", retries=8) for d in dates[:8]),
        *(record(d, retries=1) for d in dates[8:20]),
        *(record(d, latency=200) for d in dates[20:40]),
        *(record(d) for d in dates[40:]),
        # the current hour is not counted yet, nor anything older than the window
        record(now - timedelta(minutes=1), error="HTTP 500", retries=1),
        record(current - timedelta(days=31), error="HTTP 500", retries=8),
    )


def test_the_budget_counts_the_objectives_days_of_whole_hours() -> None:
    now = fixed_now()
    thirty_days(make_source(), now)
    budget = objectives.budgets(now)[STREAM]
    assert budget.objective == objectives.Objective("eventually", 99.9, 60, 99.0)
    assert (budget.delivery.total, budget.delivery.bad) == (400, 8)
    # 8 bad where 0.4 were allowed: overspent twentyfold.
    assert budget.delivery.budget_left == pytest.approx(1 - 8 / 0.4)
    assert budget.latency.total == 400 and budget.latency.bad == pytest.approx(20)
    assert budget.latency.budget_left == pytest.approx(1 - 20 / 4)
    assert budget.least_left == budget.delivery.budget_left

    # The stream's own objectives: first attempt at 95 %, latency within 300 s at 90 %.
    StreamObjective.objects.create(stream_id=STREAM, delivery="first_attempt", delivery_target=95,
                                   latency_seconds=300, latency_target=90)
    cache.clear()
    budget = objectives.budgets(now)[STREAM]
    assert budget.objective.own
    assert (budget.delivery.total, budget.delivery.bad) == (400, 20)
    assert budget.delivery.budget_left == pytest.approx(0)
    assert budget.latency.bad == pytest.approx(0) and budget.latency.budget_left == pytest.approx(1)


def test_maintenance_hours_leave_the_budget() -> None:
    now = fixed_now()
    thirty_days(make_source(), now)
    current = HourlyRollup.hour_of(now)
    # The hours of the 8 failures (the newest ones: 1 to 9.4 hours back) under maintenance for the stream.
    MaintenanceWindow.objects.create(name="upgrade", scope=WindowScope.STREAM, scope_value=STREAM,
                                     starts_at=current - timedelta(hours=10), ends_at=current - timedelta(minutes=30))
    # A window for another tag changes nothing here.
    MaintenanceWindow.objects.create(name="other", scope=WindowScope.TAG, scope_value="payouts",
                                     starts_at=current - timedelta(days=20), ends_at=current)
    budget = objectives.budgets(now)[STREAM]
    left_out = Delivery.objects.filter(stream_id=STREAM, date__gte=current - timedelta(hours=10), date__lt=current)
    assert budget.left_out == 10
    assert budget.delivery.total == 400 - left_out.count()
    assert budget.delivery.bad == 0


def burning(source: Source, now: datetime, *, minutes: int, failing: bool) -> None:
    factories.store(source, *(
        record(now - timedelta(seconds=20 * n), error="HTTP 503" if failing and n % 2 else "", retries=1 if failing
               and n % 2 else 0) for n in range(1, minutes * 3)
    ))


def test_the_fast_burn_opens_an_incident_with_one_mail_and_resolves_when_it_stops() -> None:
    now = fixed_now()
    source = make_source()
    burning(source, now, minutes=70, failing=True)
    # payouts delivers everything: no burn
    factories.store(source, *(record(now - timedelta(minutes=m), stream_id=OTHER_STREAM, tag="payouts")
                              for m in range(1, 70)))
    AlertRule.objects.all().delete()  # the default rules would open their own incidents
    rule = make_rule("Burn", condition=Condition.SLO_BURN_FAST, min_deliveries=20, grace_minutes=5)
    (seen,) = conditions.observe(rule, now)
    assert seen.target_key == STREAM
    assert seen.extra["objectives"] == ["delivery"]
    assert seen.rate == pytest.approx(0.5 / 0.001, rel=0.05)  # half failing where 0.1 % is allowed
    details = conditions.describe(rule, seen, now)
    headline = conditions.headline(rule, seen, details)
    assert headline.startswith("stream orders: delivery budget burning at 5")
    assert headline.endswith("fast burn (1 h and 5 min at 14.4×)")
    assert details["error_groups"] and details["error_groups"][0]["count"] > 0
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    incident = Incident.objects.get()
    assert incident.is_open and "BUDGET BURN" in outbox.outbox[0].subject

    # Delivering again: the 5-minute window stops burning first, and the incident resolves after its grace.
    later = now + timedelta(minutes=6)
    factories.store(source, *(record(later - timedelta(seconds=20 * n)) for n in range(0, 18)))
    assert conditions.observe(rule, later) == []
    evaluate.evaluate_all(later)
    for notification_id in evaluate.evaluate_all(later + timedelta(minutes=6)):
        MAIL.send(notification_id, later + timedelta(minutes=6))
    assert not Incident.objects.get().is_open and len(outbox.outbox) == 2


def test_a_burn_needs_both_windows_and_enough_deliveries() -> None:
    now = fixed_now()
    source = make_source()
    # Failing long ago in the hour but delivering for the last 10 minutes: the short window does not burn.
    factories.store(source, *(record(now - timedelta(minutes=m), error="HTTP 500", retries=1)
                              for m in range(15, 60)))
    factories.store(source, *(record(now - timedelta(minutes=m)) for m in range(0, 10)))
    fast = make_rule("Fast", condition=Condition.SLO_BURN_FAST, min_deliveries=10)
    assert conditions.observe(fast, now) == []
    # The slow burn (6 h and 30 min at 6×) holds: 30 min hold 15 failures of 25.
    slow = make_rule("Slow", condition=Condition.SLO_BURN_SLOW, min_deliveries=10)
    (seen,) = conditions.observe(slow, now)
    assert seen.extra["burn"] == "slow"
    slow.min_deliveries = 100
    assert conditions.observe(slow, now) == []
    slow.min_deliveries = 10
    slow.scope, slow.scope_value = Scope.TAG, "payouts"
    assert conditions.observe(slow, now) == []
    assert fast.describe_condition().startswith("the delivery or latency objective's error budget burning over 1 h")


def test_a_latency_burn_says_latency() -> None:
    now = fixed_now()
    source = make_source()
    factories.store(source, *(record(now - timedelta(minutes=m), latency=400) for m in range(0, 60)))
    rule = make_rule("Burn", condition=Condition.SLO_BURN_FAST, min_deliveries=10)
    (seen,) = conditions.observe(rule, now)
    assert seen.extra["objectives"] == ["latency"]
    details = conditions.describe(rule, seen, now)
    assert details["error_groups"] == []
    assert conditions.headline(rule, seen, details).startswith("stream orders: latency budget burning at 100.0×")


def test_the_pages_show_the_budget(logged_in_client: Client) -> None:
    now = fixed_now()
    thirty_days(make_source(), now)
    client = logged_in_client
    page = client.get("/streams/").content.decode()
    assert "Budget 30 d" in page
    assert "20.0× spent" in page
    stream_page = client.get(f"/streams/{STREAM}/").content.decode()
    assert 'id="objectives"' in stream_page
    assert "99.9 % delivered eventually" in stream_page
    assert "99 % of unconfirmed deliveries within 60 s of their block" in stream_page
    assert "Burn 1 h / 5 min" in stream_page and "Burn 6 h / 30 min" in stream_page
