"""The latency p95 alert condition: per stream, the p95 processing latency of the unconfirmed deliveries of the
window above the rule's seconds, from the hourly rollups' histograms for whole hours and the raw rows for the
partial hours at the ends; an incident opens with one mail and resolves once the deliveries are fast again."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import mail as outbox

from dashboard.alerts import conditions, evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Condition, Incident, Scope
from dashboard.deliveries.latency import Percentiles, histogram_of
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.trailing_counts import trailing_latencies
from dashboard.sources.models import Source
from tests import factories
from tests.alerts.factories import HOOK, OTHER_STREAM, STREAM, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db


def timed(date: datetime, seconds: float, *, confirmed: bool = False, stream_id: str = STREAM,
          tag: str = "orders") -> dict[str, Any]:
    payload = {"block": {"number": "1", "hash": "0x1", "timestamp": str(int(date.timestamp() - seconds))},
               "chainId": "0x1", "logs": []}
    return factories.history_record(date=date, stream_id=stream_id, tag=tag, webhook_url=HOOK, confirmed=confirmed,
                                    payload=payload)


def slow_history(source: Source, now: datetime) -> None:
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    factories.store(
        source,
        # orders: slow over the last 3 hours, whole hours and both edges
        *(timed(ago(m), 200) for m in range(2, 180, 7)),
        *(timed(ago(m), 3) for m in range(5, 180, 60)),
        # confirmed deliveries wait for finality: never counted here
        *(timed(ago(m), 900, confirmed=True) for m in range(4, 180, 9)),
        # payouts: fast
        *(timed(ago(m), 2, stream_id=OTHER_STREAM, tag="payouts") for m in range(3, 180, 5)),
        # older than the window
        timed(ago(60 * 5), 5000),
    )


def test_the_window_reads_whole_hours_from_the_rollups_and_the_edges_from_rows() -> None:
    now = fixed_now()
    slow_history(make_source(), now)
    since = now - timedelta(minutes=180)
    found = trailing_latencies(since, now)
    rows = Delivery.objects.filter(date__gte=since, date__lte=now, confirmed=False)
    for stream in (STREAM, OTHER_STREAM):
        expected = histogram_of(rows.filter(stream_id=stream).values_list("latency_ms", flat=True))
        assert found[stream][0] == expected
    assert found[STREAM][1:] == ("orders", HOOK)


def test_it_holds_for_the_slow_stream_only_and_says_so() -> None:
    now = fixed_now()
    slow_history(make_source(), now)
    rule = make_rule("Slow", condition=Condition.LATENCY_P95, window_minutes=180, latency_seconds=60,
                     min_deliveries=5)
    (seen,) = conditions.observe(rule, now)
    assert seen.target_key == STREAM and seen.total == 29
    assert 120 <= seen.rate <= 300  # type: ignore[operator]
    details = conditions.describe(rule, seen, now)
    assert conditions.headline(rule, seen, details) == (
        f"stream orders: p95 latency {seen.rate:.0f} s (above 60 s) over 180 min, 29 unconfirmed deliveries "
        "to hooks.example.com"
    )
    assert rule.describe_condition() == (
        "p95 processing latency of unconfirmed deliveries above 60 s over 180 min (at least 5 deliveries)"
    )
    # Too few deliveries, a higher threshold or another scope: nothing.
    for fields in ({"min_deliveries": 100}, {"latency_seconds": 400},
                   {"scope": Scope.TAG, "scope_value": "payouts"}):
        for name, value in fields.items():
            setattr(rule, name, value)
        assert conditions.observe(rule, now) == []
        rule.refresh_from_db()


def test_an_incident_opens_with_one_mail_and_resolves_when_deliveries_are_fast_again() -> None:
    now = fixed_now()
    source = make_source()
    factories.store(source, *(timed(now - timedelta(minutes=m), 150) for m in range(1, 20)))
    make_rule("Slow", condition=Condition.LATENCY_P95, window_minutes=20, latency_seconds=60, min_deliveries=5,
              grace_minutes=5)
    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    incident = Incident.objects.get()
    assert incident.is_open and incident.stream_id == STREAM
    assert incident.summary.startswith("stream orders: p95 latency")
    assert len(outbox.outbox) == 1 and "SLOW" in outbox.outbox[0].subject
    assert evaluate.evaluate_all(now + timedelta(minutes=1)) == []  # still holding: no second mail

    # The next 25 minutes' deliveries arrive within seconds: the slow ones leave the window.
    later = now + timedelta(minutes=25)
    factories.store(source, *(timed(later - timedelta(minutes=m), 2) for m in range(0, 20)))
    assert conditions.observe(incident.rule, later) == []
    evaluate.evaluate_all(later)
    for notification_id in evaluate.evaluate_all(later + timedelta(minutes=6)):
        MAIL.send(notification_id, later + timedelta(minutes=6))
    assert not Incident.objects.get().is_open
    assert len(outbox.outbox) == 2


def test_percentiles_of_the_condition_are_the_pages() -> None:
    assert Percentiles.of(histogram_of([150_000] * 10)).p95 == pytest.approx(291.0)  # 120 + 180 × 0.95
