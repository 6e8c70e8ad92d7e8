"""Where the database's bytes go: every table of the history (a partitioned table summed over its partitions) as
heap, TOAST and each index, and the deliveries' columns by their average stored width; all of it per stored
delivery. Read from the catalog and the planner's statistics (`pg_stats.avg_width`, refreshed by ANALYZE): no row
is read, so it answers in milliseconds at any size. `manage.py storage_report` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection, transaction

from dashboard.deliveries.models import Delivery


@dataclass
class Relation:
    """One table (its partitions summed): bytes of its heap, TOAST and each index."""

    name: str
    rows: int
    heap: int
    toast: int
    indexes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.heap + self.toast + sum(self.indexes.values())


@dataclass
class Report:
    deliveries: int
    relations: list[Relation]
    # Column name to estimated bytes in the heap and TOAST (average stored width times rows), largest first.
    columns: list[tuple[str, int]]

    @property
    def total(self) -> int:
        return sum(r.total for r in self.relations)

    def per_delivery(self, size: int) -> float:
        return size / self.deliveries if self.deliveries else 0.0


# Every table of the app that grows with the history; the rest (sources, rules, users…) is a few kilobytes.
_TABLES = """
WITH RECURSIVE tree(root, oid) AS (
    SELECT c.oid, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname LIKE 'deliveries\\_%%'
       AND NOT c.relispartition
    UNION ALL
    SELECT t.root, i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.oid
)
SELECT r.relname,
       (sum(greatest(c.reltuples, 0)) FILTER (WHERE c.relkind = 'r'))::bigint,
       -- The heap with its free space and visibility maps; pg_table_size counts the TOAST table too.
       sum(pg_table_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0))::bigint,
       sum(coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0))::bigint
  FROM tree t JOIN pg_class c ON c.oid = t.oid JOIN pg_class r ON r.oid = t.root
 GROUP BY r.relname
"""

# Each index of those tables, a partitioned index summed over its partitions' indexes.
_INDEXES = """
WITH RECURSIVE tree(root, oid) AS (
    SELECT c.oid, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('i', 'I') AND NOT c.relispartition
    UNION ALL
    SELECT t.root, i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.oid
)
SELECT tab.relname, idx.relname, sum(pg_total_relation_size(t.oid))::bigint
  FROM tree t
  JOIN pg_class idx ON idx.oid = t.root
  JOIN pg_index x ON x.indexrelid = t.root
  JOIN pg_class tab ON tab.oid = x.indrelid
 WHERE tab.relname LIKE 'deliveries\\_%%'
 GROUP BY tab.relname, idx.relname
"""

# The deliveries' columns: the statistics' average width of each, weighted by each partition's rows.
_COLUMNS = """
SELECT s.attname, sum(s.avg_width::float8 * greatest(c.reltuples, 0))::bigint
  FROM pg_stats s
  JOIN pg_class c ON c.relname = s.tablename
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname
  JOIN pg_inherits i ON i.inhrelid = c.oid
 WHERE s.schemaname = current_schema() AND i.inhparent = %s::regclass AND NOT s.inherited
 GROUP BY s.attname
"""


def storage_report() -> Report:
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(_TABLES)
        relations = {name: Relation(name, int(rows or 0), int(heap), int(toast)) for name, rows, heap, toast in cursor}
        cursor.execute(_INDEXES)
        for table_name, index, size in cursor:
            if table_name in relations:
                relations[table_name].indexes[index] = int(size)
        cursor.execute(_COLUMNS, [table])
        columns = sorted(((name, int(size)) for name, size in cursor), key=lambda c: -c[1])
    deliveries = relations[table].rows if table in relations else 0
    return Report(deliveries, sorted(relations.values(), key=lambda r: -r.total), columns)


@dataclass
class Lever:
    """One way to store the deliveries in fewer bytes, measured on a sample: bytes per delivery as stored now and
    with the lever."""

    name: str
    now: float
    then: float
    how: str

    @property
    def saved(self) -> float:
        return self.now - self.then


# A sample of the deliveries in a temporary table, each payload rebuilt from its text (`::text::jsonb`), so that it is
# compressed afresh by the column it lands in: a value copied as it is keeps the compression it was stored with.
_SAMPLE = """
CREATE TEMP TABLE lever_sample ON COMMIT DROP AS
SELECT d.id, d.date,
       pg_column_size(d.payload) AS payload_now,
       d.payload::text AS payload_text,
       d.search_keys,
       delivery_key_hashes(d.search_keys) AS search_hashes,
       d.tag, d.webhook_url, d.error_message, d.stream_id
  FROM {table} d TABLESAMPLE SYSTEM (%s) REPEATABLE (7)
 LIMIT %s
"""


def measure_levers(sample: int) -> tuple[int, list[Lever]]:
    """The rows sampled and each lever's bytes per delivery, on a sample of about `sample` deliveries (pages drawn
    at random): payloads compressed by lz4 instead of pglz, or kept as JSON text; the search keys column as
    64-bit hashes (as its GIN index holds them); tag, webhook URL, error message and stream id as 4-byte ids of
    lookup tables (with the tag and URL indexes). An index's bytes with a lever are the table's index scaled by the
    ratio of the two built on the sample. Writes only temporary tables, dropped at the end."""
    table = connection.ops.quote_name(Delivery._meta.db_table)
    # The table's row count and index sizes as the report reads them from the catalog.
    report = storage_report()
    total = float(max(report.deliveries, 1))
    indexes = next((r.indexes for r in report.relations if r.name == Delivery._meta.db_table), {})
    real = {index: size / total for index, size in indexes.items()}
    with transaction.atomic(), connection.cursor() as cursor:
        percent = min(100.0, 100.0 * sample * 1.5 / total)
        cursor.execute(_SAMPLE.format(table=table), [percent, sample])
        cursor.execute("SELECT count(*) FROM lever_sample")
        n = int(cursor.fetchone()[0])
        if n == 0:
            return 0, []

        def each(sql: str) -> float:
            cursor.execute(sql)
            return float(cursor.fetchone()[0] or 0) / n

        def index_bytes(definition: str) -> float:
            cursor.execute(f"CREATE INDEX lever_index ON lever_sample {definition}")
            size = each("SELECT pg_relation_size('lever_index')")
            cursor.execute("DROP INDEX lever_index")
            return size

        levers = []
        payload_now = each("SELECT sum(payload_now) FROM lever_sample")
        for label, column, value in (
            ("payload: jsonb compressed by lz4", "jsonb COMPRESSION lz4", "payload_text::jsonb"),
            ("payload: JSON text compressed by pglz", "json COMPRESSION pglz", "payload_text::json"),
            ("payload: JSON text compressed by lz4", "json COMPRESSION lz4", "payload_text::json"),
        ):
            cursor.execute(f"CREATE TEMP TABLE lever_payload (payload {column}) ON COMMIT DROP")
            cursor.execute(f"INSERT INTO lever_payload SELECT {value} FROM lever_sample")  # noqa: S608
            levers.append(Lever(label, payload_now, each("SELECT sum(pg_column_size(payload)) FROM lever_payload"),
                                "pg_column_size of each payload (TOAST pointer or inline value)"))
            cursor.execute("DROP TABLE lever_payload")

        levers.extend(_zstd_levers(n, payload_now))

        # The GIN index already holds the keys' hashes (querysets.KeyHashes); the column could hold them too, with
        # the event names kept apart (the event rollups read them) and a collision checked against the payload.
        keys_now = each("SELECT sum(pg_column_size(search_keys)) FROM lever_sample")
        keys_then = each("SELECT sum(pg_column_size(search_hashes)) FROM lever_sample")
        levers.append(Lever("search keys column as 64-bit hashes (its index already is)", keys_now, keys_then,
                            f"column {keys_now:,.0f} -> {keys_then:,.0f} B"))

        # An index built on the sample is not the size of the table's own (its entries are spread over fewer rows):
        # the sample gives the ratio between the index now and with the lever, applied to the table's index (`real`).

        texts = ("tag", "webhook_url", "error_message", "stream_id")
        texts_now = each("SELECT sum(pg_column_size(tag) + pg_column_size(webhook_url) + pg_column_size(error_message)"
                         " + pg_column_size(stream_id)) FROM lever_sample")
        cursor.execute("ALTER TABLE lever_sample ADD COLUMN tag_id int, ADD COLUMN url_id int")
        cursor.execute("UPDATE lever_sample s SET tag_id = t.n, url_id = u.n FROM "
                       "(SELECT tag, row_number() OVER () AS n FROM lever_sample GROUP BY tag) t, "
                       "(SELECT webhook_url, row_number() OVER () AS n FROM lever_sample GROUP BY webhook_url) u "
                       "WHERE t.tag = s.tag AND u.webhook_url = s.webhook_url")
        indexes_now = real.get("delivery_tag_date", 0.0) + real.get("delivery_url_date", 0.0)
        indexes_then = indexes_now * (index_bytes("(tag_id, date)") + index_bytes("(url_id, date)")) / max(
            index_bytes("(tag, date)") + index_bytes("(webhook_url, date)"), 1)
        levers.append(Lever("tag, URL, error message and stream id as 4-byte ids (with the tag and URL indexes)",
                            texts_now + indexes_now, 4 * len(texts) + indexes_then,
                            f"columns {texts_now:,.0f} -> {4 * len(texts)} B, the tag and URL indexes "
                            f"{indexes_now:,.0f} -> {indexes_then:,.0f} B"))
        cursor.execute("DROP TABLE lever_sample")
    return n, levers


# Payloads compressed together, as many as a trained dictionary of ~100 KB covers: what zstd with such a dictionary
# approaches per payload (its lower bound), against each payload compressed on its own.
_BLOCK = 100


def _zstd_levers(n: int, payload_now: float) -> list[Lever]:
    """zstd (level 3) on each payload alone, and on blocks of `_BLOCK` payloads (the bound a trained dictionary
    approaches), read from the sample through a server-side cursor a thousand at a time (memory stays flat)."""
    import pyarrow  # the archive's dependency, loaded only for this measurement

    codec = pyarrow.Codec("zstd", compression_level=3)
    alone = together = 0
    with connection.chunked_cursor() as cursor:
        cursor.execute("SELECT payload_text FROM lever_sample WHERE payload_text IS NOT NULL")
        while rows := cursor.fetchmany(1000):
            texts = [row[0].encode() for row in rows]
            alone += sum(len(codec.compress(text, asbytes=True)) for text in texts)
            for start in range(0, len(texts), _BLOCK):
                together += len(codec.compress(b"".join(texts[start:start + _BLOCK]), asbytes=True))
    return [
        Lever("payload: zstd level 3, each payload alone", payload_now, alone / n,
              "what the payload column would hold compressed in Python (bytea), no dictionary"),
        Lever(f"payload: zstd level 3, trained dictionary (bound: {_BLOCK} compressed together)",
              payload_now, together / n, "a dictionary trained on the stream's payloads approaches this from above"),
    ]
