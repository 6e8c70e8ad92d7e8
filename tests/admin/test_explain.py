"""On a table of realistic size (100 k rows from the bulk generator), every kind of admin search is
answered through an index: EXPLAIN shows the GIN on search_keys, the btrees or the primary key, and never a
sequential scan of the deliveries."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.deliveries import partitions
from dashboard.deliveries.grouping import error_template
from dashboard.deliveries.models import Delivery, Stream
from dashboard.deliveries.payload_keys import search_keys
from dashboard.deliveries.search import parse_admin_search, search_deliveries
from dashboard.devtools import generator
from dashboard.devtools.generator import Generated, generate_deliveries
from dashboard.sources.models import Source
from tests.checks import readable_plan

ROWS = 100_000
SEED = "explain"


# Four whole weeks, Monday to Monday: every week partition the rows fill holds ~25 k of them, whatever the day
# the tests run. Rows up to now would leave the current week partly filled (~11 k rows on a Thursday), which the
# planner may rightly read whole, and which is no partition of the size this module is about.
NEWEST = datetime(2026, 3, 9, tzinfo=UTC)
WEEKS = 4


@pytest.fixture(scope="module")
def big_table(django_db_setup: None, django_db_blocker: Any) -> Iterator[Generated]:
    """Committed once for the module (each test still runs in its own transaction), removed afterwards with
    the week partitions it made: a later test's retention would find them and drop them."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        before = {p.name for p in partitions.partitions(cursor)}
        made = generate_deliveries(ROWS, seed=SEED, hostile=True, newest=NEWEST, days=7 * WEEKS)
    yield made
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE deliveries_delivery, deliveries_stream, deliveries_errorgroup CASCADE")
        Source.objects.filter(pk=made.source.pk).delete()
        for partition in partitions.partitions(cursor):
            if partition.name not in before:
                cursor.execute(f"DROP TABLE {partition.name}")
        assert {p.name for p in partitions.partitions(cursor)} == before


def sample_delivery(made: Generated) -> Delivery:
    return Delivery.objects.filter(source=made.source).order_by("-date").first()  # type: ignore[return-value]


def plan_for(text: str) -> tuple[str, list[Delivery]]:
    """The plans of the queries the admin runs for a search text (a key's probe of the search index, then the
    list query: first page, newest first), and its rows."""
    queryset = Delivery.objects.defer("payload", "tiny_payload", "search_keys").order_by("-date", "-id")
    with CaptureQueriesContext(connection) as captured:
        found = search_deliveries(queryset, parse_admin_search(text)).deliveries[:51]
    plans = []
    for query in captured.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + query["sql"])
            plans.append("\n".join(line for (line,) in cursor.fetchall()))
    return readable_plan("\n".join([*plans, found.explain()])), list(found)


def test_the_generator_makes_realistic_rows(big_table: Generated, db: None) -> None:
    assert Delivery.objects.filter(source=big_table.source).count() == ROWS
    failing = Delivery.objects.filter(source=big_table.source).exclude(status="delivered").count()
    assert 0.03 * ROWS < failing < 0.07 * ROWS
    # The keys are exactly what the ingest derives from the payload.
    for delivery in Delivery.objects.filter(source=big_table.source).order_by("?")[:200]:
        assert sorted(delivery.search_keys) == search_keys(delivery.payload, delivery.block_number)
        if delivery.error_message:
            assert delivery.error_group.template == error_template(delivery.error_message)
    assert Delivery.objects.filter(error_message__contains="<script>").exists()
    assert Stream.objects.filter(source=big_table.source).count() == len(generator.STREAMS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM deliveries_delivery GROUP BY tableoid")
        assert sorted(n for (n,) in cursor.fetchall()) == [ROWS // WEEKS] * WEEKS, "whole weeks, one per partition"


def key_cases(made: Generated) -> dict[str, tuple[str, Any]]:
    """Search text per key kind, and what the results must satisfy."""
    address = generator.address(SEED, 17)
    tx = generator.tx_hash(SEED, 4242, 2)
    topic = generator.padded_topic(generator.address(SEED, 18))
    block = sample_delivery(made).block_number
    return {
        "tx hash": (tx.upper().replace("0X", "0x"), lambda d: f"tx:{tx}" in d.search_keys),
        "address (checksum case)": ("0x" + address[2:].upper(), lambda d: f"addr:{address}" in d.search_keys),
        "topic": (f"topic:{topic}", lambda d: f"topic:{topic}" in d.search_keys),
        "block number": (str(block), lambda d: d.block_number == block),
    }


def test_key_searches_use_the_gin_index(big_table: Generated, db: None) -> None:
    for kind, (text, check) in key_cases(big_table).items():
        plan, rows = plan_for(text)
        assert "Bitmap Index Scan on delivery_search_hashes" in plan, f"{kind}:\n{plan}"
        # (The probe reads the column statistics from pg_stats, whose small catalogs may be scanned.)
        assert "Seq Scan on deliveries_delivery" not in plan, f"{kind}:\n{plan}"
        assert rows and all(check(Delivery.objects.get(pk=d.pk)) for d in rows), kind


def test_a_stream_id_search_uses_an_index(big_table: Generated, db: None) -> None:
    stream = big_table.stream_ids[2]
    plan, rows = plan_for(f"stream:{stream}")
    assert "Seq Scan" not in plan, plan
    assert "Index Scan" in plan and ("delivery_stream_date" in plan or "delivery_date_id" in plan), plan
    assert len(rows) == 51 and {d.stream_id for d in rows} == {stream}


def test_a_delivery_id_search_uses_the_primary_key(big_table: Generated, db: None) -> None:
    wanted = sample_delivery(big_table)
    plan, rows = plan_for(str(wanted.pk).upper())
    assert "deliveries_delivery_pkey" in plan and "Seq Scan" not in plan, plan
    assert [d.pk for d in rows] == [wanted.pk]


def test_error_text_searches_use_the_error_group_indexes(big_table: Generated, db: None) -> None:
    plan, rows = plan_for("socket hang up")
    assert "Seq Scan on deliveries_delivery" not in plan, plan
    assert "error_group" in plan and "Index Scan" in plan, plan
    assert rows and {d.error_message for d in rows} == {"socket hang up"}

    # With a variable part (an IP): the text is looked for among the group's distinct messages, and the
    # deliveries of the one holding it come through the message index (the bounds: test_errors_retries_search).
    plan, rows = plan_for("ECONNREFUSED 203.0.113.7")
    assert "Seq Scan on deliveries_delivery" not in plan, plan
    assert "delivery_message_date" in plan, plan
    assert rows and {d.error_message for d in rows} == {"connect ECONNREFUSED 203.0.113.7:443"}


def test_the_admin_answers_every_search_quickly(big_table: Generated, db: None) -> None:
    from tests.conftest import make_user

    client = Client()
    client.force_login(make_user("root", staff=True))
    texts = [text for text, _ in key_cases(big_table).values()]
    texts += [f"stream:{big_table.stream_ids[0]}", "socket hang up", "ECONNREFUSED 203.0.113.7", "<script>", ""]
    for text in texts:
        started = time.monotonic()
        response = client.get("/admin/deliveries/delivery/", {"q": text} if text else {})
        elapsed = time.monotonic() - started
        assert response.status_code == 200, text
        assert b"<script>alert" not in response.content
        # Generous for a loaded CI machine; these take tens of milliseconds.
        assert elapsed < 3, (text, elapsed)
    body = client.get("/admin/deliveries/delivery/").content.decode()
    assert "(estimated)" in body and "only the newest 200 pages" in body
