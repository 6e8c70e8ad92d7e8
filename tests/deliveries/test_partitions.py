"""The deliveries table partitioned by week: migrated in place without losing a row, partitions made where
rows need them, a record whose date changed upstream kept once, expired weeks dropped whole."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from dashboard.deliveries import partitions
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup
from dashboard.deliveries.retention import enforce_retention
from tests.checks import assert_derived_exact
from tests.deliveries.test_ingest import make_source_row, record

BEFORE = [("deliveries", "0010_period_rollup")]
# A Wednesday; retention's cutoff at 90 days is Thursday 2026-08-27 12:00, inside the week of Monday 08-24.
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def migrate_to(targets: list[tuple[str, str]] | None = None) -> None:
    """To `targets`, or to the latest migrations."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets if targets is not None else executor.loader.graph.leaf_nodes())


def _names() -> list[str]:
    with connection.cursor() as cursor:
        return [p.name for p in partitions.partitions(cursor)]


def _at(moment: datetime, n: int, **extra: object) -> dict[str, object]:
    return record(n, date=moment.isoformat().replace("+00:00", "Z"), **extra)


def _insert_plain(source_id: int, dates: list[datetime]) -> None:
    """Rows written straight into the table (as before partitioning, or by anything but the write path)."""
    with connection.cursor() as cursor:
        for date in dates:
            cursor.execute(
                """
                INSERT INTO deliveries_delivery (id, source_id, date, stream_id, tag, webhook_url, chain_id, records,
                    retries, error_message, status, search_keys, tiny_payload, record_hash, first_seen_at,
                    updated_at, is_test)
                VALUES (%s, %s, %s, 's1', 'tag-s1', 'https://hooks.example.com/s1', '0x1', 1, 0, '', 'delivered',
                        '{}', '{}', 'h', %s, %s, false)
                """,
                [uuid.uuid4(), source_id, date, date, date],
            )


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_row_and_retention_then_empties_the_old_table() -> None:
    migrate_to(BEFORE)
    try:
        source = make_source_row()
        now = timezone.now()
        old = [now - timedelta(days=100, minutes=n) for n in range(7)]
        # The old table is attached for every date before the week after its newest row.
        recent = [now - timedelta(days=10, minutes=n) for n in range(5)]
        _insert_plain(source.pk, old + recent)
        with connection.cursor() as cursor:
            cursor.execute("SELECT array_agg(id ORDER BY id) FROM deliveries_delivery")
            (ids_before,) = cursor.fetchone()
    finally:
        migrate_to()

    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(id ORDER BY id) FROM deliveries_delivery")
        assert cursor.fetchone()[0] == ids_before
        cursor.execute("SELECT count(*) FROM ONLY deliveries_delivery_legacy")
        assert cursor.fetchone()[0] == 12, "the old table is attached whole, not copied"
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'deliveries_delivery'")
        assert cursor.fetchone()[0] == "p"
        # The parent carries the model's index names, which the old table's rows are found through.
        cursor.execute(
            "SELECT count(*) FROM pg_class WHERE relname IN ('delivery_search_hashes', 'delivery_date_id') AND relkind = 'I'"
        )
        assert cursor.fetchone()[0] == 2
    assert _names()[0] == partitions.LEGACY and partitions.DEFAULT in _names()
    assert Delivery.objects.count() == 12

    # A new record lands in its week's partition, not in the old table.
    store_records(source, [_at(now, 1)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM deliveries_delivery WHERE id = %s", [uuid.UUID(int=1)])
        assert cursor.fetchone()[0] == partitions.partition_name(partitions.week_of(now))

    # Retention deletes the old table's expired rows in batches; the rest stays until the whole of it expires.
    result = enforce_retention(now=now, batch_size=3)
    assert result.deliveries_deleted == 7
    assert not result.partitions_dropped
    assert Delivery.objects.count() == 6
    later = now + timedelta(days=120)
    result = enforce_retention(now=later)
    assert partitions.LEGACY in result.partitions_dropped
    assert partitions.LEGACY not in _names()

    # And back: one plain table with every row.
    migrate_to(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'deliveries_delivery'")
            assert cursor.fetchone()[0] == "r"
            cursor.execute("SELECT count(*) FROM deliveries_delivery")
            assert cursor.fetchone()[0] == Delivery.objects.count()
    finally:
        migrate_to()


@pytest.mark.django_db
def test_ingest_makes_the_weeks_it_needs_and_takes_over_default_rows() -> None:
    source = make_source_row()
    week = partitions.week_of(datetime(2025, 6, 11, tzinfo=UTC))
    assert partitions.partition_name(week) not in _names()
    _insert_plain(source.pk, [week + timedelta(days=1)])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partitions.DEFAULT}")  # noqa: S608
        assert cursor.fetchone()[0] == 1

    store_records(source, [_at(week + timedelta(days=2), 1), _at(week + timedelta(days=9), 2)])

    names = _names()
    assert partitions.partition_name(week) in names
    assert partitions.partition_name(week + partitions.WIDTH) in names
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partitions.DEFAULT}")  # noqa: S608
        assert cursor.fetchone()[0] == 0, "the new week took the default's row of its dates"
        cursor.execute(f"SELECT count(*) FROM {partitions.partition_name(week)}")  # noqa: S608
        assert cursor.fetchone()[0] == 2
    assert Delivery.objects.count() == 3


@pytest.mark.django_db
def test_a_record_whose_date_changed_upstream_is_kept_once() -> None:
    source = make_source_row()
    first = _at(datetime(2026, 3, 1, 10, 15, tzinfo=UTC), 7, error="connect ECONNREFUSED 10.0.0.1:443")
    store_records(source, [first])
    moved = _at(datetime(2026, 3, 20, 8, 0, tzinfo=UTC), 7, error="connect ECONNREFUSED 10.0.0.1:443", retries=1)

    result = store_records(source, [moved])

    assert (result.inserted, result.updated) == (0, 1)
    assert list(Delivery.objects.values_list("date", flat=True)) == [datetime(2026, 3, 20, 8, 0, tzinfo=UTC)]
    assert ErrorGroup.objects.get().delivery_count == 1
    assert list(HourlyRollup.objects.values_list("hour", "deliveries")) == [(datetime(2026, 3, 20, 8, tzinfo=UTC), 1)]
    assert ErrorGroup.objects.get().first_seen == datetime(2026, 3, 20, 8, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_expired_weeks_go_whole_and_counts_stay_exact(settings: object) -> None:
    settings.HISTORY_RETENTION_DAYS = 90  # type: ignore[attr-defined]
    source = make_source_row()
    error = "Request failed with status code 502"
    gone = [_at(datetime(2026, 8, 17 + n, 9, tzinfo=UTC), n, error=error if n % 2 else "") for n in range(1, 7)]
    # Before the cutoff, but in the week holding it: kept until that whole week has expired.
    straddling = [_at(datetime(2026, 8, 25, 9, tzinfo=UTC), 20, error=error), _at(datetime(2026, 8, 29, tzinfo=UTC), 21)]
    recent = [_at(NOW - timedelta(days=1), 30, error=error)]
    store_records(source, gone + straddling + recent)
    rollups = HourlyRollup.objects.count()

    result = enforce_retention(now=NOW)

    # Every week before the cutoff's goes (with the week partitions other modules' committed rows left), the
    # week holding the cutoff stays; partition names sort by their week.
    expired, straddled = (partitions.partition_name(datetime(2026, 8, day, tzinfo=UTC)) for day in (17, 24))
    assert expired in result.partitions_dropped
    assert all(name < straddled for name in result.partitions_dropped), result.partitions_dropped
    assert result.deliveries_deleted == 6
    assert Delivery.objects.count() == 3
    assert partitions.partition_name(datetime(2026, 8, 17, tzinfo=UTC)) not in _names()
    group = ErrorGroup.objects.get()
    assert group.delivery_count == 2
    assert group.first_seen == datetime(2026, 8, 25, 9, tzinfo=UTC)
    assert HourlyRollup.objects.count() == rollups, "rollups outlive the deliveries"
    # The coming weeks are made ahead.
    assert partitions.partition_name(partitions.week_of(NOW + partitions.AHEAD)) in _names()


@pytest.mark.django_db
def test_rows_in_the_default_partition_expire_in_batches() -> None:
    """Each batch resumes at the newest date the last one deleted; rows of that date it left still go."""
    source = make_source_row()
    same = NOW - timedelta(days=95)
    dates = [same] * 7 + [NOW - timedelta(days=96, minutes=n) for n in range(6)] + [NOW - timedelta(days=1)]
    _insert_plain(source.pk, dates)

    result = enforce_retention(now=NOW, batch_size=4)

    assert result.deliveries_deleted == 13
    assert result.batches >= 4
    assert list(Delivery.objects.values_list("date", flat=True)) == [NOW - timedelta(days=1)]


@pytest.mark.django_db
def test_a_detached_week_left_by_a_stopped_run_is_dropped() -> None:
    name = partitions.partition_name(datetime(2020, 1, 6, tzinfo=UTC))
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (LIKE deliveries_delivery)")
    enforce_retention(now=NOW)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        assert cursor.fetchone()[0] is None


class LongReader:
    """Another connection inside a transaction that has read the deliveries table (a long export, say): it
    holds its lock on every partition until it ends."""

    def __init__(self) -> None:
        self.reading, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._read)

    def _read(self) -> None:
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute("SELECT count(*) FROM deliveries_delivery")
                self.reading.set()
                self.done.wait(10)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    def __enter__(self) -> LongReader:
        self.thread.start()
        assert self.reading.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_stored_while_a_reader_keeps_its_week_from_being_made(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(partitions, "LOCK_TIMEOUT_MS", 300)
    source = make_source_row()
    week = partitions.week_of(datetime(2025, 2, 12, tzinfo=UTC))
    with LongReader(), caplog.at_level(logging.WARNING, logger="dashboard.deliveries.partitions"):
        result = store_records(source, [_at(week + timedelta(days=1), 1), _at(week + timedelta(days=2), 2)])
    assert result.inserted == 2
    assert len([r for r in caplog.records if "not made this time" in r.message]) == 1, "one wait for the week"
    assert partitions.partition_name(week) not in _names()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partitions.DEFAULT}")  # noqa: S608
        assert cursor.fetchone()[0] == 2, "the week's rows wait in the default partition"

    # The next batch of that week, with nobody reading, makes the partition and moves them into it.
    store_records(source, [_at(week + timedelta(days=3), 3)])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partitions.partition_name(week)}")  # noqa: S608
        assert cursor.fetchone()[0] == 3
    assert_derived_exact()


@pytest.mark.django_db(transaction=True)
def test_a_detach_that_waits_for_a_reader_is_left_for_the_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitions, "LOCK_TIMEOUT_MS", 300)
    source = make_source_row()
    store_records(source, [_at(datetime(2026, 8, 18, tzinfo=UTC), 1, error="socket hang up")])
    with LongReader():
        result = enforce_retention(now=NOW)
    assert partitions.partition_name(datetime(2026, 8, 17, tzinfo=UTC)) in result.partitions_deferred
    assert Delivery.objects.count() == 1
    assert ErrorGroup.objects.get().delivery_count == 1

    result = enforce_retention(now=NOW)
    assert result.deliveries_deleted == 1
    assert ErrorGroup.objects.get().delivery_count == 0


@pytest.mark.django_db
def test_a_week_partly_covered_by_another_partition_is_made_for_the_rest() -> None:
    """A partition of another shape (the old table's, or one made by hand) keeps its dates; the week
    partitions beside it take the days it leaves."""
    week = partitions.week_of(datetime(2025, 4, 9, tzinfo=UTC))
    odd = "deliveries_delivery_odd"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {odd} (LIKE deliveries_delivery INCLUDING DEFAULTS)")
        cursor.execute(
            f"ALTER TABLE deliveries_delivery ATTACH PARTITION {odd} FOR VALUES FROM"
            f" ('{(week + timedelta(days=3)).isoformat()}') TO ('{(week + timedelta(days=10)).isoformat()}')"
        )
        made = partitions.ensure_partitions(cursor, [week + timedelta(days=1), week + timedelta(days=12)])
        spans = {p.name: (p.start, p.end) for p in partitions.partitions(cursor)}
    assert [spans[name] for name in made] == [
        (week, week + timedelta(days=3)),
        (week + timedelta(days=10), week + timedelta(days=14)),
    ]
    store_records(make_source_row(), [_at(week + timedelta(days=2), 1), _at(week + timedelta(days=5), 2)])
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {odd}")  # noqa: S608
        assert cursor.fetchone()[0] == 1
