"""Each condition reads the stored deliveries the way its description says."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dashboard.alerts import conditions
from dashboard.alerts.models import Condition
from tests.alerts.factories import (
    HOOK,
    REFUSED,
    failures,
    fixed_now,
    make_rule,
    make_source,
    record,
    store,
    successes,
)

pytestmark = pytest.mark.django_db


def test_any_failure_sees_retries_that_failed_in_the_window() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(window_minutes=5)
    # Sent 12 min ago: the second retry (1 min + 10 min after the first attempt) failed a minute ago, while
    # a delivery whose only retry failed 11 min ago, and one that has since succeeded, are outside.
    store(
        source,
        record(now - timedelta(minutes=12), error="certificate has expired", retries=2, block=1),
        record(now - timedelta(minutes=12), error="certificate has expired", retries=1, block=2),
        record(now - timedelta(minutes=12), retries=2, block=3),
        record(now - timedelta(days=2), error="certificate has expired", retries=7, block=4),
    )

    (seen,) = conditions.observe(rule, now)
    assert seen.failures == 1
    details = conditions.describe(rule, seen, now)
    assert [f["block_number"] for f in details["first_failures"]] == [1]
    assert conditions.headline(rule, seen, details) == (
        "stream orders: 1 failed delivery to hooks.example.com — certificate has expired"
    )

    # Nothing failed in the last 5 minutes once the window moves past that retry.
    assert conditions.observe(rule, now + timedelta(minutes=5)) == []


def test_failure_rate_needs_the_threshold_and_the_minimum_count() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(
        condition=Condition.FAILURE_RATE, threshold_percent=50, min_deliveries=10, window_minutes=30
    )
    failures(source, now, 5)
    successes(source, now, 4)
    assert conditions.observe(rule, now) == []  # 9 deliveries: below the minimum

    successes(source, now - timedelta(minutes=1), 1)
    assert conditions.observe(rule, now) == []  # 5 of 10 is not above 50 %

    failures(source, now - timedelta(minutes=2), 1)
    (seen,) = conditions.observe(rule, now)
    assert (seen.failures, seen.total) == (6, 11)
    headline = conditions.headline(rule, seen, conditions.describe(rule, seen, now))
    assert headline == (
        "stream orders: 55 % of 11 deliveries to hooks.example.com failed in 30 min — connect ECONNREFUSED"
    )


def test_consecutive_looks_at_the_newest_deliveries_only() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(condition=Condition.CONSECUTIVE, consecutive_failures=3)
    successes(source, now - timedelta(minutes=5), 5)
    failures(source, now, 2)
    assert conditions.observe(rule, now) == []

    store(source, record(now - timedelta(seconds=1), error="socket hang up"))
    (seen,) = conditions.observe(rule, now)
    assert seen.failures == 3

    store(source, record(now))
    assert conditions.observe(rule, now) == []


def test_error_state_risk_opens_per_webhook_url_below_the_threshold() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(condition=Condition.ERROR_STATE_RISK, threshold_percent=80)
    failures(source, now, 15)
    assert conditions.observe(rule, now) == []  # 85

    failures(source, now - timedelta(minutes=5), 6)
    (seen,) = conditions.observe(rule, now)
    assert seen.target_key == HOOK
    assert seen.rate == 79
    headline = conditions.headline(rule, seen, conditions.describe(rule, seen, now))
    assert headline.startswith(
        "stream orders: modelled success rate 79 % for hooks.example.com (error state below 70 %)"
    )


def test_the_poller_stale_condition_uses_the_last_successful_poll() -> None:
    now = fixed_now()
    make_source("fresh", last_success_at=now - timedelta(minutes=2))
    make_source("silent", last_success_at=now - timedelta(minutes=30))
    make_source("off", last_success_at=now - timedelta(minutes=30), enabled=False)
    rule = make_rule(condition=Condition.POLLER_STALE, stale_minutes=10)

    (seen,) = conditions.observe(rule, now)

    assert seen.label == "silent"
    assert seen.stale_for == timedelta(minutes=30)


@pytest.mark.parametrize(
    ("template", "example", "expected"),
    [
        ("connect ECONNREFUSED <ip>", REFUSED, "connect ECONNREFUSED"),
        (
            "Request failed with status code <n>",
            "Request failed with status code 502",
            "Request failed with status code 502",
        ),
        ("timeout of <duration> exceeded", "timeout of 10000ms exceeded", "timeout of 10000ms exceeded"),
        ("getaddrinfo ENOTFOUND <host>", "getaddrinfo ENOTFOUND hooks.example.com", "getaddrinfo ENOTFOUND"),
        ("socket hang up", "socket hang up", "socket hang up"),
    ],
)
def test_short_error_keeps_what_helps_in_a_subject(template: str, example: str, expected: str) -> None:
    assert conditions.short_error(template, example) == expected
