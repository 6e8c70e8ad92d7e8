"""storage_report: the parts add up to each table's size as Postgres counts it, per delivery."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from dashboard.deliveries.storage import measure_levers, storage_report
from tests.factories import history_record, make_source, store

pytestmark = pytest.mark.django_db


def test_the_parts_add_up_to_what_postgres_counts() -> None:
    source = make_source()
    store(source, *[history_record(block=19_000_000 + i, error="HTTP 500" if i % 3 == 0 else "",
                                   payload={"confirmed": True, "chainId": "0x1", "block": {"number": str(i)},
                                            "txs": [{"hash": f"0x{i:064x}"}], "logs": []})
                    for i in range(60)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
        cursor.execute("ANALYZE")
        cursor.execute(
            "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'deliveries_delivery'::regclass"
        )
        whole = int(cursor.fetchone()[0])
    report = storage_report()
    deliveries = next(r for r in report.relations if r.name == "deliveries_delivery")
    assert report.deliveries == 60
    assert deliveries.total == whole
    assert "delivery_stream_date" in deliveries.indexes
    assert {"payload", "stream_id", "search_keys"} <= {name for name, _ in report.columns}
    assert any(r.name == "deliveries_hourlyrollup" for r in report.relations)

    out = StringIO()
    call_command("storage_report", stdout=out)
    text = out.getvalue()
    assert "60 deliveries" in text and "index delivery_stream_date" in text and "payload" in text


def test_the_levers_are_measured_on_a_sample_and_leave_nothing_behind() -> None:
    source = make_source()
    # Payloads of ~6 KB of repetitive JSON: stored compressed, now and with each payload lever.
    logs = [{"logIndex": str(k), "address": "0x" + "ab" * 20, "topic0": "0x" + "cd" * 32, "data": "0x" + "00" * 64}
            for k in range(20)]
    store(source, *[history_record(block=19_000_000 + i, tag=f"tag-{i % 3}",
                                   payload={"confirmed": True, "chainId": "0x1", "block": {"number": str(i)},
                                            "txs": [{"hash": f"0x{i:064x}"}], "logs": logs})
                    for i in range(120)])
    raw = len(json.dumps({"logs": logs}))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    sampled, levers = measure_levers(1000)

    assert sampled == 120
    by_name = {lever.name.split(":")[0].split(" (")[0]: lever for lever in levers}
    payload = [lever for lever in levers if lever.name.startswith("payload")]
    assert len(payload) == 5
    assert all(0 < lever.now < raw / 2 and 0 < lever.then < raw / 2 for lever in payload)
    alone, together = (lever.then for lever in payload if "zstd" in lever.name)
    assert together < alone
    hashes = by_name["search keys column as 64-bit hashes"]
    assert 0 < hashes.then < hashes.now
    ids = next(lever for lever in levers if lever.name.startswith("tag, URL"))
    assert "-> 16 B" in ids.how and ids.then < ids.now
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('lever_sample'), to_regclass('lever_payload')")
        assert cursor.fetchone() == (None, None)

    out = StringIO()
    call_command("storage_report", "--levers", "1000", stdout=out)
    assert "levers, measured on a sample of 120 deliveries" in out.getvalue()
