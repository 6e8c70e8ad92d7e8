"""Where the database's bytes go: every table of the history (a partitioned table summed over its partitions) as
heap, TOAST and each index, and the deliveries' columns by their average stored width; all of it per stored
delivery. Read from the catalog and the planner's statistics (`pg_stats.avg_width`, refreshed by ANALYZE): no row
is read, so it answers in milliseconds at any size. `manage.py storage_report` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

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
