"""The write path: idempotent upserts keyed by the upstream id, only changed rows rewritten, derived data exact."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup, Stream
from dashboard.sources.models import Source
from tests.checks import assert_derived_exact
from tests.factories import history_record, make_source

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 10, 15, tzinfo=UTC)


def make_source_row(name: str = "a") -> Source:
    return make_source(name)


def record(n: int, *, error: str = "", retries: int = 0, minutes: int = 0, stream: str = "s1", **extra: Any) -> dict[str, Any]:
    """Record number `n` (its id and block follow from n), `minutes` after T0."""
    rec = history_record(
        date=T0 + timedelta(minutes=minutes), record_id=uuid.UUID(int=n), stream_id=stream, tag=f"tag-{stream}",
        webhook_url=f"https://hooks.example.com/{stream}", error=error, retries=retries, confirmed=n % 2 == 0,
        block=1000 + n, records=2,
        payload={"block": {"number": str(1000 + n)}, "retries": retries, "logs": [], "txs": [
            {"hash": "0x" + f"{n:064x}", "fromAddress": "0x" + "aa" * 20}
        ]},
    )
    rec.update(extra)
    return rec


def test_it_inserts_then_leaves_unchanged_records_alone() -> None:
    source = make_source_row()
    batch = [record(i, minutes=i) for i in range(1, 51)]

    first = store_records(source, batch)
    stamps = dict(Delivery.objects.values_list("id", "updated_at"))
    second = store_records(source, copy.deepcopy(batch))

    assert (first.inserted, first.updated, first.unchanged) == (50, 0, 0)
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 50)
    assert dict(Delivery.objects.values_list("id", "updated_at")) == stamps
    assert Delivery.objects.count() == 50
    assert_derived_exact()


def test_a_changed_record_is_rewritten_and_everything_derived_follows() -> None:
    source = make_source_row()
    store_records(source, [record(1, error="connect ECONNREFUSED 203.0.113.7:443", retries=0),
                           record(2, error="connect ECONNREFUSED 198.51.100.2:443", minutes=70),
                           record(3, minutes=5)])
    refused = ErrorGroup.objects.get()
    assert refused.delivery_count == 2
    assert Delivery.objects.get(id=uuid.UUID(int=1)).status == "retrying"

    # Record 1's retry hit a timeout, then record 2 got through; record 3 starts failing.
    result = store_records(source, [
        record(1, error="timeout of 10000ms exceeded", retries=1),
        record(2, error="", retries=2, minutes=70),
        record(3, error="Request failed with status code 500", retries=7, minutes=5),
    ])

    assert (result.inserted, result.updated, result.new_failures) == (0, 3, 1)
    row1, row2, row3 = (Delivery.objects.get(id=uuid.UUID(int=i)) for i in (1, 2, 3))
    assert (row1.retries, row1.status, row1.error_group.template) == (1, "retrying", "timeout of <duration> exceeded")
    assert (row2.status, row2.error_group) == ("delivered", None)
    assert row3.status == "failed"
    refused.refresh_from_db()
    assert refused.delivery_count == 0
    assert_derived_exact()
    assert HourlyRollup.objects.filter(status="delivered").values_list("deliveries", flat=True).get() == 1


def test_first_and_last_seen_follow_the_rows_in_the_group() -> None:
    source = make_source_row()
    store_records(source, [record(i, error="socket hang up", minutes=i * 30) for i in range(1, 5)])
    group = ErrorGroup.objects.get()
    assert (group.first_seen, group.last_seen, group.delivery_count) == (T0 + timedelta(minutes=30), T0 + timedelta(minutes=120), 4)

    store_records(source, [record(1, minutes=30, retries=1), record(4, minutes=120, retries=1)])

    group.refresh_from_db()
    assert (group.first_seen, group.last_seen, group.delivery_count) == (T0 + timedelta(minutes=60), T0 + timedelta(minutes=90), 2)
    assert_derived_exact()


def test_a_group_that_only_gains_rows_widens_its_span_and_an_emptied_one_starts_again() -> None:
    source = make_source_row()
    store_records(source, [record(1, error="socket hang up", minutes=60)])
    # Gains only: an older and a newer row widen the span without re-reading the group's rows.
    store_records(source, [record(2, error="socket hang up", minutes=10), record(3, error="socket hang up", minutes=90)])
    group = ErrorGroup.objects.get()
    assert (group.first_seen, group.last_seen, group.delivery_count) == (T0 + timedelta(minutes=10), T0 + timedelta(minutes=90), 3)

    # Every row leaves the group (delivered now): the count is 0, the span stays as it was.
    store_records(source, [record(n, minutes=m, retries=1) for n, m in ((1, 60), (2, 10), (3, 90))])
    group.refresh_from_db()
    assert group.delivery_count == 0

    # A row gained by the emptied group is all it holds: the span is that row's, not widened from the old one.
    store_records(source, [record(4, error="socket hang up", minutes=40)])
    group.refresh_from_db()
    assert (group.first_seen, group.last_seen, group.delivery_count) == (T0 + timedelta(minutes=40), T0 + timedelta(minutes=40), 1)
    assert_derived_exact()


def test_a_batch_repeating_an_id_keeps_the_last_copy() -> None:
    source = make_source_row()
    result = store_records(source, [record(1, error="socket hang up"), record(1, error="")])
    assert result.inserted == 1
    assert Delivery.objects.get().status == "delivered"
    assert_derived_exact()


def test_unreadable_records_are_reported_and_the_rest_stored() -> None:
    source = make_source_row()
    result = store_records(source, [record(1), {"id": "not-a-uuid"}, record(2, date="yesterday"), {"date": "x"}])
    assert result.inserted == 1
    assert len(result.rejected) == 3


def test_hostile_values_are_stored_without_failing_the_batch() -> None:
    source = make_source_row()
    nasty = record(
        1, error="bad\x00byte <script>alert(1)</script> \ud800", tag="t\x00ag",
        payload={"weird": "nul \x00 inside", "lone": "\udc00", "big": 10**30, "nested": {"k\x00": [None, True]}},
    )
    nasty["tinyPayload"]["block"] = "0x" + "f" * 40  # does not fit a bigint
    result = store_records(source, [nasty, record(2)])
    assert result.inserted == 2
    row = Delivery.objects.get(id=uuid.UUID(int=1))
    assert "<script>" in row.error_message and "\x00" not in row.error_message
    assert row.payload["weird"] == "nul \ufffd inside"
    assert row.block_number is None


def test_streams_keep_every_webhook_url_and_the_newest_tag() -> None:
    source = make_source_row()
    store_records(source, [record(1, minutes=0), record(2, minutes=10, webhookUrl="https://other.example.com/h", tag="renamed")])
    stream = Stream.objects.get()
    assert stream.webhook_urls == ["https://hooks.example.com/s1", "https://other.example.com/h"]
    assert stream.tag == "renamed"
    assert stream.chain_ids == ["0x1"]
    assert_derived_exact()


def test_a_batch_of_new_and_changed_records_counts_both() -> None:
    """New rows' changes are gathered while their COPY is stored, the changed rows' after their upsert: one
    batch holding both counts each once, in the groups, the rollups, the streams and the result."""
    source = make_source_row()
    store_records(source, [record(1, error="socket hang up"), record(2, minutes=20)])

    result = store_records(source, [
        record(1, error="", retries=1),                                  # changed: now delivered
        record(2, error="socket hang up", retries=1, minutes=20),       # changed: now failing
        record(3, error="socket hang up", minutes=30),                  # new, failing
        record(4, minutes=90, stream="s2"),                             # new, a stream not seen before
        record(5, minutes=40, tag="renamed"),                           # new, the stream's newest tag
    ])

    assert (result.inserted, result.updated, result.unchanged, result.new_failures) == (3, 2, 0, 2)
    assert ErrorGroup.objects.get().delivery_count == 2
    assert {s.stream_id: s.tag for s in Stream.objects.all()} == {"s1": "renamed", "s2": "tag-s2"}
    assert sum(HourlyRollup.objects.values_list("deliveries", flat=True)) == 5
    assert_derived_exact()


def test_copy_rows_returns_what_it_computed_while_the_server_stored_the_rows() -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from dashboard.deliveries.ingest import copy_rows
    from dashboard.deliveries.partitions import ensure_partitions
    from dashboard.deliveries.records import parse_records

    source = make_source_row()
    parsed = parse_records([record(i, minutes=i) for i in range(1, 4)], [])
    calls: list[int] = []
    with transaction.atomic(), connection.cursor() as cursor:
        ensure_partitions(cursor, (p.date for p in parsed))
        answer = copy_rows(cursor, "deliveries_delivery", source.pk, parsed, {}, timezone.now(),
                           meanwhile=lambda: calls.append(1) or "prepared")
    assert (answer, calls) == ("prepared", [1])
    assert Delivery.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_server_gone_before_the_copy_is_djangos_database_error() -> None:
    """The COPY goes through the raw psycopg cursor; its errors reach the callers as Django's, like every other
    statement's (a poll's handlers catch `DatabaseError`)."""
    import psycopg
    from django.db import DatabaseError, connection
    from django.utils import timezone

    from dashboard.deliveries.ingest import copy_rows
    from dashboard.deliveries.records import parse_records
    from tests.checks import server_conninfo

    parsed = parse_records([record(1)], [])
    try:
        with connection.cursor() as cursor:
            with psycopg.connect(server_conninfo(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
            with pytest.raises(DatabaseError):
                copy_rows(cursor, "deliveries_delivery", 1, parsed, {}, timezone.now())
        assert connection.errors_occurred
    finally:
        connection.close()


def test_two_sources_keep_their_own_rollups() -> None:
    a, b = make_source_row("a"), make_source_row("b")
    store_records(a, [record(1), record(2, error="socket hang up")])
    store_records(b, [record(3), record(4)])
    assert Stream.objects.count() == 2
    assert_derived_exact()


def test_numbers_as_strings_nulls_and_odd_dates_are_read_as_the_upstream_meant() -> None:
    source = make_source_row()
    quirky = [
        record(1, error="socket hang up", tinyPayload={"chainId": 137, "confirmed": "true", "block": 1001,
                                                       "records": "2", "retries": "3"}),
        record(2, tinyPayload={"chainId": "56", "confirmed": "false", "block": "1002.0", "retries": "03"}),
        record(3, error="socket hang up", tinyPayload=None, payload={"retries": 2, "chainId": "0X89"}),
        record(4, tag=None, errorMessage=None, webhookUrl=None, payload=None, date=int(T0.timestamp() * 1000)),
        record(5, date="2026-03-01T10:15:00.123456789+00:00", extraField={"kept": [1]}),
    ]

    result = store_records(source, quirky)

    assert (result.inserted, result.rejected) == (5, [])
    rows = {d.id.int: d for d in Delivery.objects.all()}
    assert (rows[1].chain_id, rows[1].confirmed, rows[1].block_number, rows[1].retries) == ("0x89", True, 1001, 3)
    assert rows[1].status == "retrying" and rows[1].records == 2
    assert (rows[2].chain_id, rows[2].confirmed, rows[2].block_number, rows[2].retries) == ("0x38", False, 1002, 3)
    assert (rows[3].chain_id, rows[3].retries, rows[3].tiny_payload) == ("0x89", 2, {})
    assert (rows[4].tag, rows[4].error_message, rows[4].status, rows[4].date) == ("", "", "delivered", T0)
    assert rows[5].date == T0 + timedelta(microseconds=123456)
    assert_derived_exact()


def test_rollups_follow_new_and_changed_rows_without_recounting_their_hours() -> None:
    from dashboard.deliveries.models import EventPeriodRollup, EventRollup, PeriodRollup
    from tests.web.test_decoded_payload import payload

    source = make_source_row()

    def decoded(n: int, *, minutes: int, stream: str = "s1", error: str = "", retries: int = 0,
                logs: slice = slice(None)) -> dict[str, Any]:
        # Decoded events (transfer, transferbatch unless `logs` leaves it out): every rollup table gets rows.
        return record(n, minutes=minutes, stream=stream, error=error, retries=retries,
                      payload=payload(retries=retries, logs=payload()["logs"][logs]) | {"block": {"number": str(1000 + n)}})

    # From 10:22 to 12:35 (hours 10:00, 11:00 and 12:00, one six-hour period), two streams, some failing.
    first = [decoded(n, minutes=n * 7, stream=f"s{n % 2}", error="socket hang up" if n % 3 == 0 else "",
                     retries=n % 3) for n in range(1, 21)]
    store_records(source, first)
    assert_derived_exact()
    ten = T0.replace(minute=0)
    kept = set(HourlyRollup.objects.filter(hour=ten).values_list("pk", flat=True))
    kept_events = set(EventRollup.objects.filter(hour=ten).values_list("pk", flat=True))
    assert kept and kept_events

    # New rows in 10:00 only add to its rows; record 12 (11:39) now succeeds, and its payload holds no
    # transferbatch event any more: it leaves its old rows and joins others, beside a new row in 11:00;
    # 12:00 gains a new failing row with its first group.
    result = store_records(source, [
        decoded(101, minutes=0, stream="s1", retries=1), decoded(102, minutes=1, stream="s1"),
        decoded(103, minutes=2, stream="s0", error="socket hang up", retries=1),
        decoded(12, minutes=84, stream="s0", retries=2, logs=slice(0, 1)),
        decoded(104, minutes=86, stream="s0"),
        decoded(105, minutes=130, stream="s1", error="Request failed with status code 502", retries=4),
    ])

    assert (result.inserted, result.updated, result.unchanged) == (5, 1, 0)
    assert_derived_exact()
    # The 10:00 rows that existed are the same rows, counted up in place.
    assert kept <= set(HourlyRollup.objects.filter(hour=ten).values_list("pk", flat=True))
    assert kept_events <= set(EventRollup.objects.filter(hour=ten).values_list("pk", flat=True))
    # Record 1's row (s1, delivered after one retry) now counts record 101 too.
    delivered_s1 = HourlyRollup.objects.get(hour=ten, stream_id="s1", status="delivered", retries=1)
    assert (delivered_s1.pk in kept, delivered_s1.deliveries) == (True, 2)
    total = Delivery.objects.count()
    for model in (HourlyRollup, PeriodRollup):
        assert sum(model.objects.values_list("deliveries", flat=True)) == total == 25
    for model in (EventRollup, EventPeriodRollup):
        assert sum(model.objects.filter(event="transfer").values_list("deliveries", flat=True)) == total
        assert sum(model.objects.filter(event="transferbatch").values_list("deliveries", flat=True)) == total - 1
    for model in (HourlyRollup, PeriodRollup, EventRollup, EventPeriodRollup):
        assert not model.objects.filter(deliveries__lte=0).exists()
