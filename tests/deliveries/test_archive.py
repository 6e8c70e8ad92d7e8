"""Cold history: expired days exported to Parquet and verified before retention deletes them, searched, restored
(on the local filesystem and on a real S3-compatible server on loopback)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from dashboard.deliveries import archive
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup, PeriodRollup, Stream
from dashboard.deliveries.retention import enforce_retention
from dashboard.env import ImproperlyConfiguredEnv, env_archive_url
from tests.checks import assert_derived_exact
from tests.deliveries.test_ingest import T0, make_source_row, record
from tests.factories import history_record

pytestmark = pytest.mark.django_db

DAYS = [date(2026, 3, 1), date(2026, 3, 2), date(2026, 3, 3)]
# The week partitions of those days (2026-03-01 is a Sunday): both wholly expired at NOW.
WEEKS = {"deliveries_delivery_p20260223", "deliveries_delivery_p20260302"}
NOW = T0 + timedelta(days=110)


def tx_hash(n: int) -> str:
    return "0x" + f"{n:064x}"


def stored_history() -> None:
    """30 deliveries over three days (10, 16 and 4; two week partitions), some failing, one without a payload."""
    source = make_source_row()
    records = [record(i, minutes=i * 90, error="socket hang up" if i % 3 == 0 else "", retries=i % 3) for i in range(1, 30)]
    records.append(history_record(date=T0 + timedelta(hours=2), record_id="00000000-0000-0000-0000-0000000000ff"))
    store_records(source, records)


def every_column() -> list[dict[str, Any]]:
    names = [f.attname for f in Delivery._meta.concrete_fields]
    return list(Delivery.objects.order_by("id").values(*names))


def derived() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    return (
        sorted(HourlyRollup.objects.values_list("hour", "stream_id", "status", "retries", "deliveries", "error_group_id")),
        sorted(PeriodRollup.objects.values_list("hour", "stream_id", "status", "retries", "deliveries")),
        sorted(ErrorGroup.objects.values_list("id", "delivery_count")),
        sorted(Stream.objects.values_list("stream_id", "first_delivery_at", "last_delivery_at", "webhook_urls")),
    )


@pytest.fixture
def local_archive(settings: Any, tmp_path: Path) -> archive.Store:
    settings.HISTORY_RETENTION_DAYS = 90
    settings.ARCHIVE_URL = f"file://{tmp_path}/archive"
    return archive.open_store()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    """A real S3-compatible server (moto) on loopback, with a bucket."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "test-key")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        fs = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}", scheme="http", region="us-east-1", allow_bucket_creation=True
        )
        fs.create_dir("archive-test")
        yield endpoint
    server.stop()


@pytest.fixture
def s3_archive(settings: Any, s3_server: str, monkeypatch: pytest.MonkeyPatch) -> archive.Store:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    settings.HISTORY_RETENTION_DAYS = 90
    settings.ARCHIVE_URL = "s3://archive-test/cold/history"
    settings.ARCHIVE_S3_ENDPOINT = s3_server
    return archive.open_store()


def run(*args: str) -> str:
    out = StringIO()
    call_command("archive", *args, stdout=out)
    return out.getvalue()


def round_trip(store: archive.Store) -> None:
    stored_history()
    before_rows, before_derived = every_column(), derived()
    assert len(before_rows) == 30

    result = enforce_retention(now=NOW)

    assert WEEKS <= set(result.partitions_dropped) and result.partitions_unarchived == {}
    assert result.days_archived == 3 and result.deliveries_deleted == 30
    assert Delivery.objects.count() == 0
    assert archive.archived_days(store) == DAYS
    manifest = archive.read_manifest(store, DAYS[0])
    assert manifest is not None and manifest["table"] == "deliveries_delivery"
    assert [c["name"] for c in manifest["columns"]] == [f.column for f in Delivery._meta.concrete_fields]
    assert sum(archive.read_manifest(store, day)["rows"] for day in DAYS) == 30  # type: ignore[index]

    for day in DAYS:
        run("restore", str(day), "--keep-days", "0")

    assert every_column() == before_rows, "every column of every row as it was"
    assert derived() == before_derived, "rollups, error-group counts and streams as they were"
    assert_derived_exact()
    for day in DAYS:
        assert archive.verify_day(store, day).ok


def test_export_verify_drop_restore_round_trip(local_archive: archive.Store) -> None:
    round_trip(local_archive)


def test_round_trip_through_an_s3_server_on_loopback(s3_archive: archive.Store) -> None:
    round_trip(s3_archive)
    assert "tx:" + tx_hash(7) in Delivery.objects.get(block_number=1007).search_keys
    out = run("search", tx_hash(7))
    assert "00000000-0000-0000-0000-000000000007" in out and "1 deliveries found" in out


def test_a_restore_twice_inserts_nothing_the_second_time(local_archive: archive.Store) -> None:
    stored_history()
    rollups = derived()[:2]
    enforce_retention(now=NOW)
    assert "10 of 10 archived deliveries inserted" in run("restore", str(DAYS[0]), "--keep-days", "0")
    assert "0 of 10 archived deliveries inserted" in run("restore", str(DAYS[0]), "--keep-days", "0")
    assert Delivery.objects.count() == 10
    # The day's rollups recomputed from its rows are what ingest had kept; the other days' stayed.
    assert derived()[:2] == rollups
    failing = Delivery.objects.exclude(error_group=None).count()
    assert sum(ErrorGroup.objects.values_list("delivery_count", flat=True)) == failing > 0


def damage(kind: str) -> Callable[[archive.Store, date], None]:
    def apply(store: archive.Store, day: date) -> None:
        path = f"{store.day_dir(day)}/part-00000.parquet"
        if kind == "missing":
            store.fs.delete_file(path)
        else:
            data = bytearray(store.read_bytes(path))
            data[len(data) // 2] ^= 0xFF
            store.write_bytes(path, bytes(data))

    return apply


@pytest.mark.parametrize("kind", ["corrupted", "missing"])
def test_a_damaged_file_fails_verification(local_archive: archive.Store, kind: str) -> None:
    stored_history()
    run("export", str(DAYS[0]), str(DAYS[-1]))
    assert "verified, 10 rows" in run("verify", str(DAYS[0]))
    damage(kind)(local_archive, DAYS[1])

    with pytest.raises(CommandError, match="1 day\\(s\\) not verified: 2026-03-02"):
        run("verify", str(DAYS[0]), str(DAYS[-1]))
    verdict = archive.verify_day(local_archive, DAYS[1])
    assert not verdict.ok and ("sha256" in verdict.problem or "missing" in verdict.problem)


@pytest.mark.parametrize("kind", ["corrupted", "missing"])
def test_a_partition_whose_export_does_not_verify_is_not_dropped(
    local_archive: archive.Store, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that loses or damages what it is given: the export's re-read fails, nothing is dropped."""
    stored_history()
    write = archive._write_day

    def write_then_damage(store: archive.Store, day: date, previous: dict[str, Any] | None) -> dict[str, Any]:
        manifest = write(store, day, previous)
        if day == DAYS[1]:
            damage(kind)(store, day)
        return manifest

    monkeypatch.setattr(archive, "_write_day", write_then_damage)

    result = enforce_retention(now=NOW)

    # Days 1 and 2 are the second week's: that partition stays; the first week (day 0) goes.
    assert "deliveries_delivery_p20260223" in result.partitions_dropped
    assert "deliveries_delivery_p20260302" not in result.partitions_dropped
    assert list(result.partitions_unarchived) == ["deliveries_delivery_p20260302"]
    assert "did not verify" in result.partitions_unarchived["deliveries_delivery_p20260302"]
    assert Delivery.objects.count() == 20


def test_a_damaged_archive_of_rows_still_stored_is_exported_again(local_archive: archive.Store) -> None:
    stored_history()
    run("export", str(DAYS[0]), str(DAYS[-1]))
    damage("corrupted")(local_archive, DAYS[1])
    before = every_column()

    result = enforce_retention(now=NOW)

    assert result.days_archived == 1 and WEEKS <= set(result.partitions_dropped)
    for day in DAYS:
        archive.restore_day(local_archive, day)
    assert every_column() == before


def test_an_archive_holding_rows_the_database_lost_is_never_overwritten(local_archive: archive.Store) -> None:
    stored_history()
    run("export", str(DAYS[1]))
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM deliveries_delivery WHERE block_number = 1017")

    with pytest.raises(CommandError, match="holds 1 deliveries the database does not: not overwritten"):
        run("export", str(DAYS[1]))
    result = enforce_retention(now=NOW)
    assert "deliveries_delivery_p20260302" in result.partitions_unarchived
    assert archive.read_manifest(local_archive, DAYS[1])["rows"] == 16  # type: ignore[index]


def test_a_restored_day_is_held_from_retention_until_released(local_archive: archive.Store) -> None:
    stored_history()
    enforce_retention(now=NOW)
    out = run("restore", str(DAYS[2]))
    assert "retention keeps it until" in out

    result = enforce_retention()
    assert "is restored and held until" in result.partitions_unarchived["deliveries_delivery_p20260302"]
    assert Delivery.objects.count() == 4

    run("release", str(DAYS[2]))
    result = enforce_retention()
    assert "deliveries_delivery_p20260302" in result.partitions_dropped
    assert Delivery.objects.count() == 0


def test_the_search_finds_a_tx_hash_and_says_how_long_it_took(local_archive: archive.Store) -> None:
    stored_history()
    enforce_retention(now=NOW)

    out = run("search", tx_hash(17).upper().replace("0X", "0x"))

    assert "00000000-0000-0000-0000-000000000011" in out
    assert "1 deliveries found for" in out and " s (3 archived days, 30 rows' keys read)" in out
    assert "0 deliveries found" in run("search", tx_hash(999), "--from", "2026-03-02")


def test_the_export_skips_a_verified_day_and_writes_its_manifest_last(local_archive: archive.Store) -> None:
    stored_history()
    first = run("export", str(DAYS[0]), str(DAYS[-1]))
    again = run("export", str(DAYS[0]), str(DAYS[-1]))
    assert first.count(": exported") == 3 and again.count(": already archived") == 3
    manifest = archive.read_manifest(local_archive, DAYS[0])
    assert manifest is not None
    assert set(manifest) >= {"schema_version", "table", "range", "rows", "columns", "files", "content_sha256"}
    assert all(len(f["sha256"]) == 64 for f in manifest["files"])
    # Without its manifest a day is not archived, whatever files it has.
    local_archive.fs.delete_file(f"{local_archive.day_dir(DAYS[0])}/manifest.json")
    assert archive.verify_day(local_archive, DAYS[0]).problem == "not archived (no manifest)"
    assert ": exported" in run("export", str(DAYS[0]))
    listed = run("list")
    assert "2026-03-01: 10 rows, 1 files" in listed and "3 days archived" in listed
    json.dumps(manifest)


def test_the_content_checksum_ignores_how_rows_are_batched() -> None:
    table = pa.table({
        "a": pa.array([1, None, 3] * 5000, type=pa.int64()),
        "b": pa.array([["x", "y"], [], None] * 5000, type=pa.list_(pa.string())),
        "c": pa.array([datetime(2026, 1, 1, tzinfo=UTC), None, datetime(2026, 1, 2, tzinfo=UTC)] * 5000,
                      type=pa.timestamp("us", tz="UTC")),
    })
    whole, pieces = archive.ContentChecksum(), archive.ContentChecksum()
    whole.add(table)
    for offset in range(0, table.num_rows, 777):
        pieces.add(table.slice(offset, 777))
    assert whole.hexdigest() == pieces.hexdigest()
    changed = archive.ContentChecksum()
    changed.add(table.set_column(0, "a", pa.array([1, None, 4] * 5000, type=pa.int64())))
    assert changed.hexdigest() != whole.hexdigest()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("restore", "yesterday"), "'yesterday' is not a day"),
        (("restore", "2026-03-09"), "2026-03-09 is not archived"),
        (("search", "hello world"), "is not a search key"),
        (("export", "2026-03-05", "2026-03-01"), "is before the first"),
        (("search", tx_hash(1), "--limit", "0"), "--limit must be at least 1"),
    ],
)
def test_bad_input_is_a_clear_error(local_archive: archive.Store, args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_without_an_archive_the_commands_say_so_and_retention_drops_as_before(settings: Any) -> None:
    settings.ARCHIVE_URL = ""
    settings.HISTORY_RETENTION_DAYS = 90
    with pytest.raises(CommandError, match="No archive configured: set ARCHIVE_URL"):
        run("list")
    stored_history()
    result = enforce_retention(now=NOW)
    assert WEEKS <= set(result.partitions_dropped) and result.days_archived == 0


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True), ("file:///var/archive", True), ("s3://bucket/prefix", True), ("s3://bucket", True),
        ("file://relative/path", False), ("s3://key:secret@bucket/x", False), ("https://example.com/x", False),
        ("/var/archive", False),
    ],
)
def test_the_archive_url_setting(monkeypatch: pytest.MonkeyPatch, value: str, ok: bool) -> None:
    monkeypatch.setenv("ARCHIVE_URL", value)
    if ok:
        assert env_archive_url("ARCHIVE_URL") == value
    else:
        with pytest.raises(ImproperlyConfiguredEnv) as raised:
            env_archive_url("ARCHIVE_URL")
        assert "secret" not in str(raised.value)


def test_rows_outside_a_week_partition_go_by_whole_archived_days(
    local_archive: archive.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the default partition rows are deleted day by day, up to the first day whose archive does not verify."""
    stored_history()
    with connection.cursor() as cursor:
        # The test's transaction wrote these rows: their deferred foreign-key checks first.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE deliveries_delivery DETACH PARTITION deliveries_delivery_p20260302")
        cursor.execute("INSERT INTO deliveries_delivery SELECT * FROM deliveries_delivery_p20260302")
        cursor.execute("DROP TABLE deliveries_delivery_p20260302")
        cursor.execute("SELECT count(*) FROM deliveries_delivery_default")
        assert cursor.fetchone()[0] == 20
    write = archive._write_day

    def write_then_damage(store: archive.Store, day: date, previous: dict[str, Any] | None) -> dict[str, Any]:
        manifest = write(store, day, previous)
        if day == DAYS[2]:
            damage("missing")(store, day)
        return manifest

    monkeypatch.setattr(archive, "_write_day", write_then_damage)

    result = enforce_retention(now=NOW)

    assert "deliveries_delivery_default" in result.partitions_unarchived
    assert sorted(Delivery.objects.values_list("date__date", flat=True).distinct()) == [DAYS[2]]
    assert Delivery.objects.count() == 4 and archive.verify_day(local_archive, DAYS[1]).ok is False
    assert archive.read_manifest(local_archive, DAYS[1])["rows"] == 16  # type: ignore[index]


def test_exports_stop_starting_days_when_the_runs_time_is_spent(local_archive: archive.Store, settings: Any) -> None:
    settings.CELERY_TASK_SOFT_TIME_LIMIT = 0
    stored_history()

    result = enforce_retention(now=NOW)

    assert not WEEKS & set(result.partitions_dropped) and result.days_archived == 0
    assert all("time for the archive is spent" in why for why in result.partitions_unarchived.values())
    assert Delivery.objects.count() == 30


def test_a_day_written_to_since_its_export_is_exported_again_before_its_partition_goes(
    local_archive: archive.Store,
) -> None:
    stored_history()
    run("export", str(DAYS[0]), str(DAYS[-1]))
    manifest = archive.read_manifest(local_archive, DAYS[1])
    assert manifest is not None and archive._unchanged_since_export(local_archive, DAYS[1], manifest)
    with connection.cursor() as cursor:
        # In the test's own transaction: the row's xmin and updated_at may stay as they were, its place does not.
        cursor.execute("UPDATE deliveries_delivery SET retries = 7, updated_at = now() WHERE block_number = 1017")
    assert not archive._unchanged_since_export(local_archive, DAYS[1], manifest)
    assert not archive.verify_day(local_archive, DAYS[1]).ok
    before = every_column()

    result = enforce_retention(now=NOW)

    assert result.days_archived == 1 and WEEKS <= set(result.partitions_dropped)
    for day in DAYS:
        archive.restore_day(local_archive, day)
    assert every_column() == before
    assert Delivery.objects.get(block_number=1017).retries == 7
