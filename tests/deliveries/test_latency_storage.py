"""Each delivery's block time and processing latency: read from the payload at ingest, none without a block
timestamp, filled for rows stored before by `fill_latencies`; the simulator's records over HTTP carry them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from dashboard.deliveries.latency import latency_ms
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.records import parse_record
from dashboard.polling.walks import poll
from tests.factories import history_record, make_source, source_for, store

pytestmark = pytest.mark.django_db

DATE = datetime(2026, 3, 2, 10, 0, 7, 250_000, tzinfo=UTC)


def block_payload(timestamp: Any) -> dict[str, Any]:
    return {"block": {"number": "19000000", "hash": "0xab", "timestamp": timestamp}, "chainId": "0x1", "logs": []}


def test_it_reads_the_block_time_and_latency_from_the_payload() -> None:
    mined = int((DATE - timedelta(seconds=3)).timestamp())
    parsed = parse_record(history_record(date=DATE, payload=block_payload(str(mined))))
    assert parsed.block_time == datetime.fromtimestamp(mined, UTC)
    assert parsed.latency_ms == 3_250
    assert parse_record(history_record(date=DATE, payload=block_payload(mined))).latency_ms == 3_250


@pytest.mark.parametrize("timestamp", ["", None, "0", 0, "yesterday", True])
def test_it_has_no_latency_without_a_readable_block_timestamp(timestamp: Any) -> None:
    parsed = parse_record(history_record(date=DATE, payload=block_payload(timestamp)))
    assert (parsed.block_time, parsed.latency_ms) == (None, None)


def test_a_record_without_its_payload_has_no_latency() -> None:
    # excludePayload: the tinyPayload carries the block number only.
    parsed = parse_record(history_record(date=DATE))
    assert (parsed.block_time, parsed.latency_ms) == (None, None)


def test_a_test_webhook_has_no_latency() -> None:
    record = history_record(date=DATE, chain="", payload={"block": {"number": "", "hash": "", "timestamp": ""},
                                                         "chainId": "", "logs": []})
    record["tinyPayload"]["block"] = ""
    parsed = parse_record(record)
    assert parsed.is_test and parsed.latency_ms is None


def test_latency_is_kept_within_the_column() -> None:
    assert latency_ms(DATE, DATE - timedelta(days=40)) is None
    assert latency_ms(DATE, DATE + timedelta(seconds=2)) == -2_000


def test_ingest_stores_both_and_a_rewrite_keeps_them() -> None:
    source = make_source()
    mined = int((DATE - timedelta(seconds=4)).timestamp())
    record = history_record(date=DATE, error="socket hang up", payload=block_payload(str(mined)))
    store(source, record)
    row = Delivery.objects.get()
    assert (row.block_time, row.latency_ms) == (datetime.fromtimestamp(mined, UTC), 4_250)
    record["errorMessage"] = ""
    record["tinyPayload"]["retries"] = 1
    assert store(source, record).updated == 1
    assert Delivery.objects.values_list("status", "latency_ms").get() == ("delivered", 4_250)


def test_fill_latencies_fills_rows_stored_before_and_resumes() -> None:
    source = make_source()
    dates = [DATE - timedelta(hours=h) for h in (0, 7, 30)]
    store(source, *(history_record(date=d, block=n, payload=block_payload(str(int(d.timestamp()) - 2)))
                    for n, d in enumerate(dates)), history_record(date=DATE, block=99))
    expected = dict(Delivery.objects.values_list("id", "latency_ms"))
    # as rows stored before the columns existed
    Delivery.objects.update(block_time=None, latency_ms=None)
    out = StringIO()
    call_command("fill_latencies", "--before", "2026-03-02T06:00:00Z", stdout=out)
    assert "Done: 2 deliveries filled" in out.getvalue()
    call_command("fill_latencies", stdout=out)
    assert dict(Delivery.objects.values_list("id", "latency_ms")) == expected
    assert sorted(v for v in expected.values() if v is not None) == [2_250, 2_250, 2_250]


def test_polled_records_carry_their_latency(simulator: Any) -> None:
    source = source_for(simulator)
    poll(source)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(latency_ms), count(*) FILTER (WHERE latency_ms < 0),"
            " count(*) FILTER (WHERE payload IS NOT NULL AND NOT is_test AND latency_ms IS NULL)"
            " FROM deliveries_delivery"
        )
        total, with_latency, negative, missing = cursor.fetchone()
    assert total > 0 and with_latency > 0
    assert (negative, missing) == (0, 0)
    for row in Delivery.objects.exclude(latency_ms=None)[:50]:
        assert row.latency_ms == (row.date - row.block_time) // timedelta(milliseconds=1)
