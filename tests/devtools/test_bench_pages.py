"""The page benchmark requests every page, list filter and search kind, and flags wasteful plans."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from dashboard.devtools.generator import generate_deliveries
from dashboard.devtools.management.commands.bench_pages import _removed_by_filter, _removed_in_index_alone

# transaction=True: closing the export after its first chunk ends the request, which closes the connection.
pytestmark = pytest.mark.django_db(transaction=True)


def test_it_times_every_page_filter_and_search(capsys: pytest.CaptureFixture[str]) -> None:
    generate_deliveries(3000, days=3, newest=datetime.now(UTC), failure_rate=0.1, analyze=False)

    call_command("bench_pages", "--rounds", "2", "--export-rows", "500", "--flag-removed", "0")

    out = capsys.readouterr().out
    for line in ("overview", "streams", "stream page", "timeline 30 d", "error groups 7 d", "retries 7 d by stream",
                 "delivery, oldest", "status=failing", "group", "error text", "q (tx hash)", "next page (after=)",
                 "first byte, all deliveries", "tx hash: search box", "busy address: admin",
                 "common topic: deliveries list", "block: search box", "error text: deliveries list"):
        assert f"  {line} " in out, line
    assert "3,000 deliveries stored" in out
    # With a threshold of 0 rows, any plan that filters at all is flagged, with its page and query.
    assert "rows removed by filter in" in out and "SELECT" in out
    assert "over their p95 target" in out or "under their p95 targets" in out


def test_rows_removed_count_every_loop_of_every_node() -> None:
    plan = {
        "Node Type": "Nested Loop", "Actual Loops": 1, "Rows Removed by Join Filter": 10,
        "Plans": [
            {"Node Type": "Seq Scan", "Actual Loops": 1, "Rows Removed by Filter": 100},
            {"Node Type": "Index Scan", "Actual Loops": 50, "Rows Removed by Filter": 3},
            # A catalog's rows follow the schema, not the data.
            {"Node Type": "Seq Scan", "Relation Name": "pg_statistic", "Actual Loops": 1, "Rows Removed by Filter": 6000},
        ],
    }
    assert _removed_by_filter(plan) == 10 + 100 + 150


def test_rows_an_index_only_scan_removed_without_fetching_rows_are_told_apart() -> None:
    plan = {
        "Node Type": "Append", "Actual Loops": 1,
        "Plans": [
            {"Node Type": "Index Only Scan", "Actual Loops": 1, "Rows Removed by Filter": 700, "Heap Fetches": 0},
            # Rows fetched from the table to check visibility: not from the index alone.
            {"Node Type": "Index Only Scan", "Actual Loops": 1, "Rows Removed by Filter": 40, "Heap Fetches": 12},
            {"Node Type": "Index Scan", "Actual Loops": 2, "Rows Removed by Filter": 5},
        ],
    }
    assert _removed_by_filter(plan) == 700 + 40 + 10
    assert _removed_in_index_alone(plan) == 700
