"""The ingest benchmark runs the write path and plain COPY in scratch schemas and leaves the real tables alone."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection

from dashboard.deliveries.models import Delivery, DeliveryChange
from dashboard.polling.models import HistoryWalk
from dashboard.sources.models import Source

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_prints_the_ratios_the_walk_and_the_profile_and_drops_its_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    call_command(
        "bench_ingest", "--rows", "300", "--batch", "100", "--rounds", "1", "--profile", "5", "--statements", "--memory"
    )

    out = capsys.readouterr().out
    for line in ("plain COPY binary", "write path, new rows", "write path, 10 % of rows changed", "parsing in Python",
                 "write path / COPY, new rows, write only:", "write path / COPY, new rows, parsing included:",
                 "write path / COPY, new rows, each round:", "this process's CPU time:",
                 "walk, new rows (pages read and parsed while the last is stored)",
                 "walk / COPY, new rows, parsing included:", "walk / COPY, new rows, each round:",
                 "walk, new rows, this process's CPU time:",
                 "walk of 3 pages of 100, peak allocated under tracemalloc:",
                 "cProfile of parsing and writing 300 new rows", "Ordered by: internal time",
                 "Ordered by: cumulative time", "dashboard/deliveries/records.py",
                 "each statement of the write path, 300 new rows", "the COPY of the rows and Python between"):
        assert line in out, line
    # Each batch took the write lock once, and the rollups were written by one statement a batch.
    assert re.search(r" 3×  SELECT pg_advisory_xact_lock", out), out
    assert re.search(r" 3×  WITH delta AS MATERIALIZED", out), out
    # The failing rows' attempt history went to the scratch schema too, and nothing reached the real tables.
    assert not Delivery.objects.exists() and not DeliveryChange.objects.exists()
    # The walk's source and checkpoint were the scratch schema's.
    assert not Source.objects.exists() and not HistoryWalk.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_%%'")
        assert cursor.fetchone()[0] == 0
