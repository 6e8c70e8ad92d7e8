"""Cold history: each day of deliveries exported to Parquet (a filesystem or an S3-compatible store) before
retention deletes it, read back by a search, and restored into the database on demand.

Layout under ARCHIVE_URL: `deliveries/day=YYYY-MM-DD/part-00000.parquet` … and `manifest.json`, one folder per
UTC day. The manifest (table, range, rows, columns, schema version, each file's sha256 and a checksum of the
rows' content) is written last, so a day whose export stopped half-way has no manifest and counts as not
archived. A day is **verified** when its files match their sha256, re-read to the manifest's row count and
content checksum, and the database's rows of that day compute the same count and checksum (for a day just
exported, the manifest's are the database's, computed from the rows read for the files; an older archive is
compared with the database afresh); retention drops a partition only when each of its days holding rows is
verified (`ready_to_drop`), and only if it holds as many rows under the write lock as were verified.

The columns are the `Delivery` model's, read from its fields: a column added later is archived without a
change here (unknown types travel as Postgres's text form and are restored by Postgres's own parsing).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection, models, transaction
from django.utils import timezone

from dashboard.deliveries import partitions
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.write_lock import take_write_lock

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
TABLE = Delivery._meta.db_table
FOLDER = "deliveries"
MANIFEST = "manifest.json"
# Rows read from the database at a time (~4 kB each as Python objects with a payload: few, to keep memory low),
# and rows per Parquet row group.
BATCH_ROWS = 2_000
ROW_GROUP_ROWS = 10_000
# Rows per file: a day of 1 M deliveries is a handful of files, each small enough to re-read at once.
FILE_ROWS = 250_000
# The content checksum hashes the rows in blocks of this many, however they were read.
CHECKSUM_BLOCK = 8_192
DAY = timedelta(days=1)


class ArchiveError(Exception):
    """The archive cannot be used for what was asked; the message says why (never a credential)."""


# Store


@dataclass(frozen=True)
class Store:
    fs: pafs.FileSystem
    base: str
    # The archive's address as it may be printed and logged.
    shown: str
    is_local: bool

    def day_dir(self, day: date) -> str:
        return f"{self.base}/{FOLDER}/day={day.isoformat()}"

    def write_bytes(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as out:
            out.write(data)

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type == pafs.FileType.File)

    def make_dir(self, path: str) -> None:
        if self.is_local:
            self.fs.create_dir(path, recursive=True)


def archive_enabled() -> bool:
    return bool(settings.ARCHIVE_URL)


def open_store(url: str | None = None) -> Store:
    """The archive at `url` (ARCHIVE_URL by default). S3's credentials come from the environment
    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), read by pyarrow itself, never by this code."""
    url = settings.ARCHIVE_URL if url is None else url
    if not url:
        raise ArchiveError("No archive configured: set ARCHIVE_URL (file:///path or s3://bucket/prefix).")
    parts = urlsplit(url)
    if parts.scheme == "file":
        base = parts.path.rstrip("/")
        return Store(pafs.LocalFileSystem(), base, f"file://{base}", is_local=True)
    if parts.scheme == "s3" and parts.netloc and "@" not in parts.netloc:
        base = (parts.netloc + parts.path).rstrip("/")
        options: dict[str, Any] = {"region": settings.ARCHIVE_S3_REGION}
        if settings.ARCHIVE_S3_ENDPOINT:
            endpoint = urlsplit(settings.ARCHIVE_S3_ENDPOINT)
            options.update(endpoint_override=endpoint.netloc, scheme=endpoint.scheme)
        return Store(pafs.S3FileSystem(**options), base, f"s3://{base}", is_local=False)
    raise ArchiveError("The archive's URL must be file:///absolute/path or s3://bucket/prefix.")


# Columns


@dataclass(frozen=True)
class Column:
    name: str
    # What the export selects: the column, or its text form.
    select: str
    type: pa.DataType
    # The restore puts a null into a column whose row (a foreign key's target) is gone.
    nulls_when_missing: tuple[str, str] | None = None


_INTEGERS = {
    "AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField", "SmallIntegerField",
    "PositiveIntegerField", "PositiveBigIntegerField", "PositiveSmallIntegerField",
}
_TEXTS = {"CharField", "TextField", "SlugField", "EmailField", "URLField"}


def _arrow_type(field: models.Field[Any, Any]) -> pa.DataType | None:
    """The Parquet type a field is stored as; None: its Postgres text form (a string)."""
    kind = field.get_internal_type()
    if isinstance(field, models.ForeignKey):
        return _arrow_type(field.target_field)
    if isinstance(field, ArrayField):
        inner = _arrow_type(field.base_field)
        return None if inner is None else pa.list_(inner)
    if kind in _INTEGERS:
        return pa.int64()
    if kind in _TEXTS:
        return pa.string()
    if kind == "DateTimeField":
        return pa.timestamp("us", tz="UTC")
    if kind == "BooleanField":
        return pa.bool_()
    if kind == "FloatField":
        return pa.float64()
    return None


def delivery_columns() -> list[Column]:
    """The deliveries table's columns, from the model's fields, in their order."""
    columns = []
    quote = connection.ops.quote_name
    for model_field in Delivery._meta.concrete_fields:
        name = str(model_field.column)
        arrow = _arrow_type(model_field)
        missing = None
        if isinstance(model_field, models.ForeignKey) and model_field.remote_field.on_delete is models.SET_NULL:
            target = model_field.related_model._meta  # type: ignore[union-attr]
            missing = (target.db_table, str(model_field.target_field.column))
        if arrow is None:
            # UUIDs, JSON and anything newer: Postgres's text form, which its input reads back exactly.
            columns.append(Column(name, f"{quote(name)}::text", pa.string(), missing))
        else:
            columns.append(Column(name, quote(name), arrow, missing))
    return columns


def arrow_schema(columns: list[Column]) -> pa.Schema:
    return pa.schema([pa.field(c.name, c.type) for c in columns])


# Content checksum


class ContentChecksum:
    """sha256 of the rows' values, column by column in blocks of CHECKSUM_BLOCK rows, so the same rows give the
    same digest whether they come from the database or from the files, whatever their batches."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.rows = 0

    def add(self, table: pa.Table | pa.RecordBatch) -> None:
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        if self._pending_rows >= CHECKSUM_BLOCK:
            whole = pa.concat_tables(self._pending)
            done = whole.num_rows // CHECKSUM_BLOCK * CHECKSUM_BLOCK
            for offset in range(0, done, CHECKSUM_BLOCK):
                self._hash_block(whole.slice(offset, CHECKSUM_BLOCK))
            rest = whole.slice(done)
            self._pending, self._pending_rows = [rest], rest.num_rows

    def hexdigest(self) -> str:
        if self._pending_rows:
            self._hash_block(pa.concat_tables(self._pending))
            self._pending, self._pending_rows = [], 0
        return self._sha.hexdigest()

    def _hash_block(self, block: pa.Table) -> None:
        for name in block.column_names:
            values = block.column(name).combine_chunks()
            self._sha.update(name.encode() + b"\x00")
            self._sha.update(_fixed_width_bytes(pc.cast(pc.is_valid(values), pa.int8()), 1))
            if pa.types.is_list(values.type):
                lengths = pc.cast(pc.fill_null(pc.list_value_length(values), -1), pa.int64())
                self._sha.update(_fixed_width_bytes(lengths, 8))
                values = pc.binary_join(pc.cast(values, pa.list_(pa.large_string())), pa.scalar("\x1f", pa.large_string()))
            text = pc.fill_null(pc.cast(values, pa.large_string()), "")
            self._sha.update(_fixed_width_bytes(pc.binary_length(text), 8))
            data = text.buffers()[2]
            if data is not None and len(text):
                offsets = memoryview(text.buffers()[1]).cast("q")
                self._sha.update(memoryview(data)[offsets[text.offset]: offsets[text.offset + len(text)]])


def _fixed_width_bytes(values: pa.Array, width: int) -> memoryview:
    """The values' bytes of a fixed-width array with no nulls, whatever its offset and buffer padding."""
    data = values.buffers()[1]
    return memoryview(data)[values.offset * width: (values.offset + len(values)) * width]


# Reading the database


def _day_range(day: date) -> tuple[datetime, datetime]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + DAY


def database_batches(
    day: date, columns: list[Column], versions: RowVersions | None = None
) -> Iterator[pa.RecordBatch]:
    """The day's rows, ordered by date and id, as Arrow batches: one statement (one snapshot) through a
    server-side cursor; their row versions summed into `versions` when given."""
    start, end = _day_range(day)
    schema = arrow_schema(columns)
    select = ", ".join(c.select for c in columns) + (f", {ROW_VERSION}" if versions is not None else "")
    with transaction.atomic():
        # Binary: timestamps and numbers are read faster (the text-cast columns come as text either way).
        raw = connection.connection.cursor(name=f"archive_{day:%Y%m%d}", binary=True)  # type: ignore[union-attr]
        try:
            raw.execute(
                f"SELECT {select} FROM {TABLE} WHERE date >= %s AND date < %s ORDER BY date, id",  # noqa: S608
                [start, end],
            )
            while rows := raw.fetchmany(BATCH_ROWS):
                values_by_column = list(zip(*rows, strict=True))
                if versions is not None:
                    versions.add(list(values_by_column.pop()))
                arrays = [pa.array(values, type=c.type) for c, values in zip(columns, values_by_column, strict=True)]
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        finally:
            raw.close()


def database_rows(day: date) -> int:
    start, end = _day_range(day)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE date >= %s AND date < %s", [start, end])  # noqa: S608
        return int(cursor.fetchone()[0])


# Manifests and files


def read_manifest(store: Store, day: date) -> dict[str, Any] | None:
    path = f"{store.day_dir(day)}/{MANIFEST}"
    if not store.exists(path):
        return None
    try:
        manifest = json.loads(store.read_bytes(path))
    except ValueError as error:
        raise ArchiveError(f"The manifest of {day} is not JSON: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
        raise ArchiveError(f"The manifest of {day} is of an unknown schema version.")
    return manifest


def archived_days(store: Store) -> list[date]:
    """The days that have a manifest, oldest first."""
    selector = pafs.FileSelector(f"{store.base}/{FOLDER}", allow_not_found=True, recursive=False)
    days = []
    for info in store.fs.get_file_info(selector):
        name = info.base_name
        if info.type == pafs.FileType.Directory and name.startswith("day="):
            try:
                day = date.fromisoformat(name.removeprefix("day="))
            except ValueError:
                continue
            if store.exists(f"{store.day_dir(day)}/{MANIFEST}"):
                days.append(day)
    return sorted(days)


class _HashingFile(io.RawIOBase):
    """A write-only file passing bytes on to the store and hashing them on the way."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha.update(view)
        self._out.write(view.tobytes())
        self.size += len(view)
        return len(view)


def _file_sha256(store: Store, path: str) -> str:
    sha = hashlib.sha256()
    with store.fs.open_input_stream(path) as stream:
        while chunk := stream.read(8 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def file_batches(store: Store, day: date, manifest: dict[str, Any], columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    for entry in manifest["files"]:
        with store.fs.open_input_file(f"{store.day_dir(day)}/{entry['path']}") as handle:
            yield from pq.ParquetFile(handle).iter_batches(batch_size=BATCH_ROWS, columns=columns)


# Export and verification

# Each stored row version named by where it lies and the transaction that wrote it: any later write to a day
# (an insert, an update, a delete, a restore, a table rewrite) changes the sum of these over the day. Read with
# the exported rows, in their statement, so the sum describes exactly the rows in the files.
ROW_VERSION = "hashtextextended(ctid::text || ' ' || xmin::text, 0)"


class RowVersions:
    """The sum of ROW_VERSION over rows (exact, as a decimal string)."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, values: list[int]) -> None:
        self.total += sum(values)

    def value(self) -> str:
        return str(self.total)


def _unchanged_since_export(store: Store, day: date, manifest: dict[str, Any]) -> bool:
    """The cheap check before a drop of a day exported by an earlier run: the day's rows are the very row versions
    exported (count and ROW_VERSION sum, no payload read), and every file still has its sha256 (their content
    was re-read and checked against the database's checksum when they were written)."""
    if manifest.get("row_versions") is None:
        return False
    start, end = _day_range(day)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), COALESCE(sum({ROW_VERSION}::numeric), 0)::text FROM {TABLE}"  # noqa: S608
            " WHERE date >= %s AND date < %s",
            [start, end],
        )
        rows, versions = cursor.fetchone()
    if rows != manifest["rows"] or versions != manifest["row_versions"]:
        return False
    for entry in manifest["files"]:
        path = f"{store.day_dir(day)}/{entry['path']}"
        if not store.exists(path) or _file_sha256(store, path) != entry["sha256"]:
            return False
    return True


@dataclass
class Verdict:
    day: date
    ok: bool
    rows: int = 0
    problem: str = ""


@dataclass
class DayExport:
    day: date
    # "exported", "already archived" or "empty" (no rows, no manifest needed).
    outcome: str
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0


def verify_day(store: Store, day: date, manifest: dict[str, Any] | None = None) -> Verdict:
    """Re-read the day's files (sha256, rows, content checksum) and recompute the count and checksum from the
    database: all three must agree."""
    try:
        manifest = manifest or read_manifest(store, day)
    except ArchiveError as error:
        return Verdict(day, False, problem=str(error))
    if manifest is None:
        return Verdict(day, False, problem="not archived (no manifest)")
    files = _verify_files(store, day, manifest)
    if not files.ok:
        return files
    columns = delivery_columns()
    if [c.name for c in columns] != [c["name"] for c in manifest["columns"]]:
        return Verdict(day, False, manifest["rows"], "the archived columns differ from the table's")
    in_database = ContentChecksum()
    for batch in database_batches(day, columns):
        in_database.add(batch)
    if in_database.rows != manifest["rows"]:
        return Verdict(day, False, manifest["rows"],
                       f"the database holds {in_database.rows:,} rows, the archive {manifest['rows']:,}")
    if in_database.hexdigest() != manifest["content_sha256"]:
        return Verdict(day, False, manifest["rows"], "the database's rows differ from the archived rows")
    return Verdict(day, True, manifest["rows"])


def _verify_files(store: Store, day: date, manifest: dict[str, Any]) -> Verdict:
    """The files alone: each present with its sha256, and their rows' count and checksum the manifest's."""
    read_back = ContentChecksum()
    try:
        for entry in manifest["files"]:
            path = f"{store.day_dir(day)}/{entry['path']}"
            if not store.exists(path):
                return Verdict(day, False, manifest["rows"], f"{entry['path']} is missing")
            if _file_sha256(store, path) != entry["sha256"]:
                return Verdict(day, False, manifest["rows"], f"{entry['path']} does not match its sha256")
        for batch in file_batches(store, day, manifest):
            read_back.add(batch)
    except (OSError, pa.ArrowException) as error:
        return Verdict(day, False, manifest["rows"], f"the files cannot be read: {error}")
    if read_back.rows != manifest["rows"] or read_back.hexdigest() != manifest["content_sha256"]:
        return Verdict(day, False, manifest["rows"], "the files' rows differ from the manifest's")
    return Verdict(day, True, manifest["rows"])


def export_day(store: Store, day: date) -> DayExport:
    """Export one day and verify it. A day already archived is left as it is when its files are intact and the
    database's rows of the day are the row versions exported (else fully verified), so a re-run
    resumes where the last stopped; one whose archive no longer matches is exported again, unless the archive
    holds deliveries the database does not (a day deleted since, or partly): that is refused, never overwritten."""
    started = time.monotonic()
    try:
        manifest = read_manifest(store, day)
    except ArchiveError:
        manifest = None
    rows = database_rows(day)
    if manifest is not None:
        if _unchanged_since_export(store, day, manifest):
            return DayExport(day, "already archived", int(manifest["rows"]), seconds=time.monotonic() - started)
        verdict = verify_day(store, day, manifest)
        if verdict.ok:
            return DayExport(day, "already archived", verdict.rows, seconds=time.monotonic() - started)
        _refuse_to_lose_rows(store, day, manifest, rows)
    elif rows == 0:
        return DayExport(day, "empty", seconds=time.monotonic() - started)
    written = _write_day(store, day, manifest)
    # The manifest's count and checksum are the database's, computed from the rows as they were read for the
    # files (one snapshot): re-reading the files against it compares them with the database.
    verdict = _verify_files(store, day, written)
    if not verdict.ok:
        raise ArchiveError(f"The export of {day} did not verify: {verdict.problem}")
    size = sum(int(f["bytes"]) for f in written["files"])
    log.info("archive: %s exported to %s (%d rows, %d bytes)", day, store.shown, verdict.rows, size)
    return DayExport(day, "exported", verdict.rows, size, time.monotonic() - started)


def _refuse_to_lose_rows(store: Store, day: date, manifest: dict[str, Any], rows: int) -> None:
    """Before an archive is replaced: every delivery it holds must still be in the database."""
    start, end = _day_range(day)
    try:
        ids = [i for batch in file_batches(store, day, manifest, ["id"]) for i in batch.column(0).to_pylist()]
    except (OSError, pa.ArrowException):
        # Unreadable files: the database must at least hold as many rows as the manifest counted.
        if rows < int(manifest["rows"]):
            raise ArchiveError(
                f"The archive of {day} is damaged and the database holds fewer rows ({rows:,}) than it counted "
                f"({int(manifest['rows']):,}): not overwritten; restore it from a copy of the archive."
            ) from None
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {TABLE} WHERE date >= %s AND date < %s AND id = ANY(%s::uuid[])",  # noqa: S608
            [start, end, ids],
        )
        (present,) = cursor.fetchone()
    if present < len(ids):
        raise ArchiveError(
            f"The archive of {day} holds {len(ids) - present:,} deliveries the database does not: not overwritten "
            f"(`archive restore {day}` puts them back first)."
        )


def _write_day(store: Store, day: date, previous: dict[str, Any] | None) -> dict[str, Any]:
    directory = store.day_dir(day)
    store.make_dir(directory)
    manifest_path = f"{directory}/{MANIFEST}"
    if previous is not None:
        # From here until the new manifest is written, the day counts as not archived.
        store.fs.delete_file(manifest_path)
    columns = delivery_columns()
    schema = arrow_schema(columns)
    checksum = ContentChecksum()
    versions = RowVersions()
    files: list[dict[str, Any]] = []
    writer: pq.ParquetWriter | None = None
    sink: _HashingFile | None = None
    out: Any = None

    def close() -> None:
        nonlocal writer, sink, out
        if writer is not None and sink is not None:
            writer.close()
            out.close()
            files[-1].update(bytes=sink.size, sha256=sink.sha.hexdigest())
        writer = sink = out = None

    group: list[pa.RecordBatch] = []

    def write_group() -> None:
        nonlocal writer, sink, out
        if not group:
            return
        if writer is None or files[-1]["rows"] >= FILE_ROWS:
            close()
            name = f"part-{len(files):05d}.parquet"
            out = store.fs.open_output_stream(f"{directory}/{name}")
            sink = _HashingFile(out)
            writer = pq.ParquetWriter(sink, schema, compression="zstd")
            files.append({"path": name, "rows": 0})
        rows = pa.Table.from_batches(group, schema=schema)
        writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
        files[-1]["rows"] += rows.num_rows
        group.clear()

    for batch in database_batches(day, columns, versions):
        checksum.add(batch)
        group.append(batch)
        if sum(b.num_rows for b in group) >= ROW_GROUP_ROWS:
            write_group()
    write_group()
    close()
    start, end = _day_range(day)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "table": TABLE,
        "day": day.isoformat(),
        "range": {"from": start.isoformat(), "to": end.isoformat()},
        "rows": checksum.rows,
        "columns": [{"name": c.name, "type": str(c.type)} for c in columns],
        "files": files,
        "content_sha256": checksum.hexdigest(),
        "exported_at": timezone.now().isoformat(),
        # The exported row versions: with the count, what tells a later run that the day is unchanged.
        "row_versions": versions.value(),
    }
    store.write_bytes(manifest_path, json.dumps(manifest, indent=2).encode())
    listed = {f["path"] for f in files} | {MANIFEST, HOLD}
    for info in store.fs.get_file_info(pafs.FileSelector(directory)):
        if info.base_name not in listed:
            store.fs.delete_file(info.path)
    return manifest


# Retention


@dataclass
class DropCheck:
    ok: bool
    # Rows of the checked range, all verified in the archive (when ok).
    rows: int = 0
    problem: str = ""
    exported: list[DayExport] = field(default_factory=list)


def days_between(start: datetime, end: datetime) -> list[date]:
    days = []
    day = start.astimezone(UTC).date()
    while datetime(day.year, day.month, day.day, tzinfo=UTC) < end:
        days.append(day)
        day += DAY
    return days


def _is_midnight(moment: datetime) -> bool:
    return moment.astimezone(UTC).time() == datetime.min.time()


def ready_to_drop(
    store: Store, start: datetime, end: datetime, *, now: datetime | None = None, deadline: float | None = None
) -> DropCheck:
    """Export (or find already archived) and verify every day in [start, end) that holds rows: whether its
    rows may be deleted. A day no row of which is stored has nothing to lose; a day on hold (restored by an
    operator) is kept. Past `deadline` (time.monotonic()) no further day is started: what is exported stays
    exported, and a later call goes on from there."""
    if not (_is_midnight(start) and _is_midnight(end)):
        return DropCheck(False, problem=f"{start} – {end} is not whole days")
    check = DropCheck(True)
    for day in days_between(start, end):
        if database_rows(day) == 0:
            continue
        held = hold_until(store, day)
        if held is not None and held > (now or timezone.now()):
            return DropCheck(False, problem=f"{day} is restored and held until {held:%Y-%m-%d %H:%M} UTC")
        if deadline is not None and time.monotonic() > deadline:
            return DropCheck(False, problem=f"{day} not reached: this run's time for the archive is spent")
        try:
            done = export_day(store, day)
        except (ArchiveError, OSError, pa.ArrowException) as error:
            return DropCheck(False, problem=f"{day}: {error}")
        check.exported.append(done)
        check.rows += done.rows
    return check


# Holds: a restored day stays until its hold ends.

HOLD = "hold.json"


def hold_until(store: Store, day: date) -> datetime | None:
    path = f"{store.day_dir(day)}/{HOLD}"
    if not store.exists(path):
        return None
    try:
        return datetime.fromisoformat(json.loads(store.read_bytes(path))["until"])
    except (ValueError, KeyError, TypeError):
        # A hold that cannot be read still holds: an operator put it there.
        return datetime.max.replace(tzinfo=UTC)


def set_hold(store: Store, day: date, until: datetime | None) -> None:
    path = f"{store.day_dir(day)}/{HOLD}"
    if until is None:
        if store.exists(path):
            store.fs.delete_file(path)
        return
    store.make_dir(store.day_dir(day))
    store.write_bytes(path, json.dumps({"until": until.isoformat()}).encode())


# Search


@dataclass
class SearchResult:
    matches: list[dict[str, Any]]
    days: int
    rows: int
    seconds: float


SHOWN = ["id", "date", "stream_id", "status", "chain_id", "block_number", "retries", "webhook_url"]


def search(store: Store, keys: tuple[str, ...], first: date | None = None, last: date | None = None,
           limit: int = 100) -> SearchResult:
    """The archived deliveries whose search keys hold any of `keys` (as the search box builds them), in the
    days from `first` to `last` (every archived day when None): only the keys' column is read, then the
    matching rows."""
    started = time.monotonic()
    wanted = pa.array(list(keys), type=pa.string())
    matches: list[dict[str, Any]] = []
    days = rows = 0
    for day in archived_days(store):
        if (first is not None and day < first) or (last is not None and day > last):
            continue
        manifest = read_manifest(store, day)
        if manifest is None:
            continue
        days += 1
        for entry in manifest["files"]:
            with store.fs.open_input_file(f"{store.day_dir(day)}/{entry['path']}") as handle:
                parquet = pq.ParquetFile(handle)
                shown = [c for c in SHOWN if c in parquet.schema_arrow.names]
                # Row group by row group: the shown columns are read only of a group holding a match.
                for group in range(parquet.num_row_groups):
                    keys_column = parquet.read_row_group(group, columns=["search_keys"]).column(0).combine_chunks()
                    rows += len(keys_column)
                    hit = pc.is_in(pc.list_flatten(keys_column), value_set=wanted)
                    parents = pc.filter(pc.list_parent_indices(keys_column), hit)
                    if len(parents):
                        found = parquet.read_row_group(group, columns=shown).take(pc.unique(parents))
                        matches.extend(found.to_pylist())
        if len(matches) >= limit:
            break
    return SearchResult(matches[:limit], days, rows, time.monotonic() - started)


# Restore


@dataclass
class Restored:
    day: date
    archived: int
    inserted: int
    seconds: float


def restore_day(store: Store, day: date) -> Restored:
    """Put an archived day's deliveries back (those not already stored), in one transaction under the write
    lock, after checking the files; the derived data (rollups, streams, error groups and messages) is then
    recomputed by `rebuild.rebuild_derived` for that day."""
    from dashboard.deliveries.rebuild import rebuild_derived

    started = time.monotonic()
    manifest = read_manifest(store, day)
    if manifest is None:
        raise ArchiveError(f"{day} is not archived in {store.shown}.")
    files = _verify_files(store, day, manifest)
    if not files.ok:
        raise ArchiveError(f"The archive of {day} cannot be restored: {files.problem}.")
    current = {c.name: c for c in delivery_columns()}
    names = [c["name"] for c in manifest["columns"] if c["name"] in current]
    quote = connection.ops.quote_name
    listed = ", ".join(quote(n) for n in names)
    start, _end = _day_range(day)
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        partitions.ensure_partitions(cursor, [start])
        cursor.execute(
            f"CREATE TEMP TABLE archive_restore (LIKE {TABLE} INCLUDING DEFAULTS) ON COMMIT DROP"
        )
        with cursor.cursor.copy(f"COPY archive_restore ({listed}) FROM STDIN") as copy:
            for batch in file_batches(store, day, manifest, names):
                for row in zip(*(batch.column(n).to_pylist() for n in names), strict=True):
                    copy.write_row(row)
        for name in names:
            target = current[name].nulls_when_missing
            if target is not None:
                table, key = target
                cursor.execute(
                    f"UPDATE archive_restore r SET {quote(name)} = NULL WHERE {quote(name)} IS NOT NULL"  # noqa: S608
                    f" AND NOT EXISTS (SELECT 1 FROM {quote(table)} t WHERE t.{quote(key)} = r.{quote(name)})"
                )
        cursor.execute(
            f"INSERT INTO {TABLE} ({listed}) SELECT {listed} FROM archive_restore ORDER BY date, id"  # noqa: S608
            " ON CONFLICT (id, date) DO NOTHING"
        )
        inserted = cursor.rowcount
        # Dropped now, not only at commit: a caller's transaction may go on (a restore of the next day).
        cursor.execute("DROP TABLE archive_restore")
    rebuild_derived(between=(start, start + DAY))
    log.info("archive: %s restored from %s (%d of %d rows inserted)", day, store.shown, inserted, manifest["rows"])
    return Restored(day, int(manifest["rows"]), inserted, time.monotonic() - started)
