"""Counting a filter: exact up to the bound; the planner's estimate beyond it; and when the planner expects several
times the bound, the estimate alone, without reading the bound's rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from dashboard.deliveries.counting import ESTIMATE_ONLY_FACTOR, PROBE_ROWS, bounded_count
from dashboard.deliveries.models import Delivery
from dashboard.devtools.generator import generate_deliveries

pytestmark = pytest.mark.django_db(transaction=True)


def counted(queryset: object, exact_limit: int) -> tuple[object, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        result = bounded_count(queryset, exact_limit)  # type: ignore[arg-type]
    return result, [q["sql"] for q in queries.captured_queries]


def test_a_filter_expected_to_match_several_times_the_bound_is_not_counted() -> None:
    generate_deliveries(1200, days=2, analyze=True)
    limit = 1200 // (ESTIMATE_ONLY_FACTOR * 2)

    result, sql = counted(Delivery.objects.all(), limit)

    assert result.estimated and result.rows >= ESTIMATE_ONLY_FACTOR * limit  # type: ignore[attr-defined]
    # The EXPLAIN, then (under its time budget) a count that stops after PROBE_ROWS + 1 rows, never one up to
    # the bound.
    assert sql[0].startswith("EXPLAIN"), sql
    counts = [q for q in sql if "COUNT" in q.upper()]
    assert len(counts) == 1 and f"LIMIT {PROBE_ROWS + 1}" in counts[0].upper(), sql


def test_stale_statistics_do_not_turn_a_few_rows_into_an_estimate() -> None:
    """Rows deleted since the last ANALYZE (retention, a manual clean-up): the planner still expects
    hundreds, but the few rows left are counted exactly."""
    generate_deliveries(1200, days=2, analyze=True)
    keep = list(Delivery.objects.order_by("-date").values_list("pk", flat=True)[:7])
    Delivery.objects.exclude(pk__in=keep).delete()
    limit = 1200 // (ESTIMATE_ONLY_FACTOR * 2)

    result, _ = counted(Delivery.objects.all(), limit)

    assert (result.rows, result.estimated) == (7, False)  # type: ignore[attr-defined]


def test_below_that_the_bound_is_counted_and_small_counts_are_exact() -> None:
    generated = generate_deliveries(1200, days=2, analyze=True)
    stream = generated.stream_ids[0]
    exact = Delivery.objects.filter(stream_id=stream).count()

    result, sql = counted(Delivery.objects.filter(stream_id=stream), exact + 5)
    assert (result.rows, result.estimated) == (exact, False)  # type: ignore[attr-defined]
    assert any("COUNT" in q.upper() and "LIMIT" in q.upper() for q in sql), sql

    # Just past the bound (the planner expects less than the factor times it): counted up to it, and said as
    # "more than the bound" (the planner's figure, under twice the bound, may be stale and understate it).
    result, sql = counted(Delivery.objects.all(), 1000)
    assert result.estimated and result.rows >= 1001  # type: ignore[attr-defined]
    assert result.more_than == 1000  # type: ignore[attr-defined]
    assert any("COUNT" in q.upper() for q in sql), sql


def test_a_count_over_its_time_budget_gives_way_to_the_estimate(settings: Any) -> None:
    """A count that reads far (here: every row costs 20 ms) is cancelled at COUNT_BUDGET_MS; the estimate is
    shown, and the connection and the statement timeout are as they were."""
    generate_deliveries(300, days=2, analyze=True)
    settings.COUNT_BUDGET_MS = 30
    slow = Delivery.objects.extra(where=["pg_sleep(0.02) IS NOT NULL"])  # noqa: S610 - a fixed test clause

    result, _ = counted(slow, 1000)

    assert result.estimated  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    assert bounded_count(Delivery.objects.all(), 1000).rows == 300


def test_the_budget_does_not_outlive_the_count_inside_a_transaction(settings: Any) -> None:
    generate_deliveries(50, days=1, analyze=True)
    settings.COUNT_BUDGET_MS = 5000
    with transaction.atomic():
        assert bounded_count(Delivery.objects.all(), 1000).rows == 50
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "0"
