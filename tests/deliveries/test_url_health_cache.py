"""The provider-rule estimate is replayed once per hour and state of the rollups, and kept in the cache:
what it answers is what a fresh replay answers, and any change to the rollups is seen at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.deliveries import url_health
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import HourlyRollup
from tests.factories import history_record, make_source

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 34, tzinfo=UTC)
URL_A = "https://hooks.example.com/a"
URL_B = "https://hooks.example.com/b"


def _fresh(now: datetime) -> dict[str, url_health.UrlHealth]:
    rows = HourlyRollup.objects.between(HourlyRollup.hour_of(now - url_health.WINDOW), None).attempts_by_url()
    return url_health.replay(rows, now)


def _store(source: Any, url: str, minutes_ago: list[int], error: str = "", retries: int = 0) -> None:
    records = [history_record(date=NOW - timedelta(minutes=m), webhook_url=url, error=error, retries=retries)
               for m in minutes_ago]
    assert not store_records(source, records).rejected


def _rollup_reads(now: datetime) -> tuple[dict[str, url_health.UrlHealth], int]:
    with CaptureQueriesContext(connection) as captured:
        estimate = url_health.url_health_now(now)
    reads = sum(1 for q in captured.captured_queries if "GROUP BY" in q["sql"])
    return estimate, reads


def test_the_cached_estimate_is_the_replay_and_changes_with_the_rollups() -> None:
    source = make_source("health")
    _store(source, URL_A, list(range(10, 300, 7)))
    _store(source, URL_B, list(range(5, 200, 11)), error="Request failed with status code 500", retries=4)

    first, reads = _rollup_reads(NOW)
    assert reads == 1
    assert first == _fresh(NOW)
    assert first[URL_B].rate < 100

    # Read again: from the cache, no replay.
    again, reads = _rollup_reads(NOW + timedelta(minutes=20))
    assert reads == 0 and again == first

    # New failures at URL A: the next read replays and sees them.
    _store(source, URL_A, [1, 2, 3], error="socket hang up", retries=7)
    changed, reads = _rollup_reads(NOW)
    assert reads == 1
    assert changed == _fresh(NOW) and changed[URL_A].rate < first[URL_A].rate

    # A new hour moves the replay on (the window and the hours it walks).
    later = NOW + timedelta(hours=1)
    moved, reads = _rollup_reads(later)
    assert reads == 1 and moved == _fresh(later)
    assert len(moved[URL_A].history) == len(changed[URL_A].history) + 1


def test_a_deleted_rollup_is_seen() -> None:
    source = make_source("health")
    _store(source, URL_A, [10, 20])
    _store(source, URL_B, [15], error="socket hang up", retries=7)
    assert set(url_health.url_health_now(NOW)) == {URL_A, URL_B}

    HourlyRollup.objects.filter(webhook_url=URL_B).delete()

    assert set(url_health.url_health_now(NOW)) == {URL_A}


def test_a_few_urls_are_picked_from_the_whole_estimate() -> None:
    source = make_source("health")
    _store(source, URL_A, [10, 20])
    _store(source, URL_B, [15], error="socket hang up", retries=7)

    picked = url_health.url_health_now(NOW, [URL_B, "https://unknown.example.com"])

    assert picked == {URL_B: _fresh(NOW)[URL_B]}
