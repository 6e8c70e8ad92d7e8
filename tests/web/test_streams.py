from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboard.deliveries import url_health
from dashboard.deliveries.models import HourlyRollup, Stream
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.sources.models import Source
from tests.web.conftest import STREAM_A, STREAM_B, URL_A, URL_B, record, store

pytestmark = pytest.mark.django_db


def test_one_row_per_stream_with_its_numbers(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(minutes=3), stream_id=STREAM_A, tag="alpha"),
        record(date=now - timedelta(minutes=30), stream_id=STREAM_A, tag="alpha", retries=2),
        record(date=now - timedelta(days=2), stream_id=STREAM_A, tag="alpha-old"),
        *(record(date=now - timedelta(minutes=m), stream_id=STREAM_B, tag="beta", url=URL_B,
                 error="Request failed with status code 500", retries=4) for m in range(5, 15)),
    )
    # session, user, the viewer role (user and group permissions), sync banner, rollups per stream, last delivery
    # per stream, the rollups' change stamp, attempts for health (replayed, then cached), stream rows, streams
    # down at the provider
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the rollups per stream read twice: the period rollups of the whole six-hour periods before the last
    # 24 hours, the hourly rollups of the rest (deliveries.rollup_window)
    # + the latency column: the last 24 hours' histograms per stream, whole six-hour periods from the stream period
    # rollups and the edge hours from the hourly ones (deliveries.rollup_window)
    # + the maintenance windows that may be active (expectations.maintenance)
    # + the expected volume (expectations.volume): the baselines learned once an hour (stream rows, four weeks of
    # hourly rollups per stream and hour, the maintenance windows, the outage windows), then the last day's rollups
    # and last deliveries
    # + the error budgets (expectations.objectives): the 30 days' delivery counts and latency histograms per stream
    # (each: whole periods and edge hours), the maintenance windows they leave out — read once a minute —, and
    # the streams' own objectives
    # The latency column's 24 hours hold three or four whole six-hour periods, by the hour of the day: read from the
    # hourly rollups alone (one query) below four, from the stream period rollups and the edge hours (two) at four.
    day_ago = HourlyRollup.hour_of(now - timedelta(hours=24))
    latency_reads = len(RollupWindow.between(day_ago, None, per_stream=True).parts)
    # + the small streams' exact latency percentiles, one grouped read of their rows (latency_panel.exact_per_stream)
    cache.clear()
    with django_assert_num_queries(27 + latency_reads):
        logged_in_client.get("/streams/")
    # The estimate comes from the cache now: no attempts read.
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # The latency column's read stays, and the error budgets read only the streams' own objectives (the counts are
    # cached).
    with django_assert_num_queries(17 + latency_reads):
        response = logged_in_client.get("/streams/")
    assert response.status_code == 200
    entries = {e["stats"].key: e for e in response.context["entries"]}
    a, b = entries[STREAM_A], entries[STREAM_B]
    assert a["stats"].label == "alpha"
    assert a["stats"].total_recent == 2 and a["stats"].failed_recent == 0 and a["stats"].retried_recent == 2
    assert abs((a["last_delivery"] - (now - timedelta(minutes=3))).total_seconds()) < 1
    assert a["health"].state == "ok"
    # 10 deliveries x 5 failed attempts each: the rate drops from 100 to 50.
    assert b["stats"].failed_recent == 10
    assert b["health"].rate == 50
    assert b["health"].state == "error"
    # The worst stream comes first.
    assert response.context["entries"][0]["stats"].key == STREAM_B
    assert [url for url, _ in b["urls"]] == [URL_B]
    assert URL_A in response.content.decode()


def _row(hour, status, retries, n, url=URL_A):
    return {"webhook_url": url, "hour": hour, "status": status, "retries": retries, "n": n}


def test_the_provider_rule_replays_attempts_on_the_schedule() -> None:
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    start = now.replace(minute=0) - timedelta(hours=10)
    rows = [
        _row(start, "delivered", 0, 50),
        # 3 failed attempts then a success, all within the first 70 minutes of the schedule.
        _row(start + timedelta(hours=1), "delivered", 3, 4),
        _row(start + timedelta(hours=2), "retrying", 1, 10),
    ]
    health = url_health.replay(rows, now)[URL_A]
    assert health.attempts == 50 + 4 * 4 + 10 * 2
    assert health.failed_attempts == 4 * 3 + 10 * 2
    # Hour by hour: 100 (capped), 100 - 12 = 88, then 88 + 4 successes - 20 failures = 72.
    assert health.history[:3] == [100, 88, 72]
    assert health.rate == 72
    assert health.state == "at-risk"


def test_a_falling_rate_warns_before_it_crosses_seventy() -> None:
    now = timezone.now().replace(minute=59, second=0, microsecond=0)
    base = now.replace(minute=0)
    rows = [_row(base - timedelta(hours=3), "delivered", 0, 1)]
    rows += [_row(base - timedelta(hours=h), "retrying", 0, 4) for h in (2, 1, 0)]
    health = url_health.replay(rows, now)[URL_A]
    # Still above the warning line, but losing 4 points an hour: below 70 in under 5 hours.
    assert health.history == [100, 96, 92, 88]
    assert health.rate == 88
    assert health.trend_per_hour == -4
    assert health.hours_to_error is not None and health.hours_to_error <= url_health.WARN_HORIZON_HOURS
    assert health.state == "at-risk"
    assert "falls below 70" in health.explanation


def test_a_stream_the_provider_keeps_active_is_at_risk_not_in_error(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    store(
        plain_source,
        *(record(date=now - timedelta(minutes=m), stream_id=STREAM_B, tag="beta", url=URL_B,
                 error="Request failed with status code 500", retries=4) for m in range(5, 15)),
    )

    def entry() -> Any:
        response = logged_in_client.get("/streams/")
        return response, next(e for e in response.context["entries"] if e["stats"].key == STREAM_B)

    # Before the provider's status is read, the replay alone decides: rate 50 is likely in error.
    response, b = entry()
    assert (b["health"].rate, b["health"].state) == (50, "error")
    assert "1 likely in error" in response.content.decode()

    Stream.objects.filter(stream_id=STREAM_B).update(provider_status="active")
    response, b = entry()
    assert (b["health"].rate, b["health"].state) == (50, "at-risk")
    assert b["disagreement"] == ""
    body = response.content.decode()
    assert "likely in error" not in body and "1 at risk" in body
    assert "active at the provider" in body
    assert "The provider still has the stream active" in b["health"].explanation
    # The stream's own page says the same, for the stream and each of its URLs.
    page = logged_in_client.get(f"/streams/{STREAM_B}/")
    assert page.context["health"].state == "at-risk"
    assert all(uh is None or uh.state != "error" for _, uh in page.context["urls"])
    # The cached estimate itself is untouched: a stream the provider has in error reads as error.
    Stream.objects.filter(stream_id=STREAM_B).update(provider_status="error")
    _, b = entry()
    assert b["health"].state == "error"


def test_a_stream_the_provider_has_stopped_is_not_shown_healthy(
    plain_source: Source, logged_in_client: Client
) -> None:
    """The replay of a stream whose deliveries all succeeded says 100; the provider's error or terminated
    status outranks it on both pages."""
    now = timezone.now()
    store(plain_source, *(record(date=now - timedelta(minutes=m), stream_id=STREAM_B, tag="beta", url=URL_B)
                          for m in range(5, 15)))

    def entry() -> Any:
        response = logged_in_client.get("/streams/")
        return response, next(e for e in response.context["entries"] if e["stats"].key == STREAM_B)

    _, b = entry()
    assert (b["health"].rate, b["health"].state, b["health"].state_label) == (100, "ok", "Healthy")
    for status in ("terminated", "error"):
        Stream.objects.filter(stream_id=STREAM_B).update(provider_status=status)
        response, b = entry()
        assert (b["health"].rate, b["health"].state) == (100, "error")
        assert b["health"].state_label == f"{status.capitalize()} at the provider"
        assert f"The provider reports the stream {status}" in b["health"].explanation
        assert "Healthy" not in response.content.decode()
        assert "active at the provider" not in response.content.decode()
        page = logged_in_client.get(f"/streams/{STREAM_B}/")
        assert page.context["health"].state == "error"
        assert f"{status.capitalize()} at the provider" in page.content.decode()


@pytest.mark.parametrize(
    ("status", "says", "never"),
    [
        ("terminated", "cannot be reactivated, only recreated", "until the stream is reactivated"),
        ("error", "sends nothing until the stream is reactivated", "cannot be reactivated"),
        ("paused", "sends nothing until the stream is reactivated", "cannot be reactivated"),
        ("active", "", "sends nothing"),
    ],
)
def test_the_stream_page_says_one_coherent_thing_per_provider_status(
    plain_source: Source, logged_in_client: Client, status: str, says: str, never: str
) -> None:
    now = timezone.now()
    store(plain_source, *(record(date=now - timedelta(minutes=m)) for m in range(5, 8)))
    Stream.objects.filter(stream_id=STREAM_A).update(provider_status=status, provider_seen_at=now)
    page = " ".join(logged_in_client.get(f"/streams/{STREAM_A}/").content.decode().split())
    assert says in page
    assert never not in page


def test_counts_carry_thousands_separators_and_rates_say_what_they_rate(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    store(plain_source, *(record(date=now - timedelta(minutes=m)) for m in range(5, 8)),
          record(date=now - timedelta(minutes=9), error="socket hang up", retries=1))
    Stream.objects.filter(stream_id=STREAM_A).update(stats_delivered=1234567, stats_failed=12345, provider_seen_at=now)
    page = logged_in_client.get(f"/streams/{STREAM_A}/").content.decode()
    assert '<td class="num">1,234,567</td><td class="num">12,345</td>' in page
    listed = logged_in_client.get("/streams/").content.decode()
    assert "75.0% success</span>" in listed and 'title="3 of 4 delivered"' in listed
    overview = logged_in_client.get("/").content.decode()
    assert "% success</span>" in overview and "% success</span>" in overview.split("Deliveries over time")[0]
