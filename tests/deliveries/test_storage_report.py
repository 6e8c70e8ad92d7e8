"""storage_report: the parts add up to each table's size as Postgres counts it, per delivery."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from dashboard.deliveries.storage import storage_report
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
