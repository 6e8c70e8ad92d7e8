# The deliveries table becomes partitioned by week of delivery date (see deliveries/partitions.py), in place and
# in one transaction: the existing table is attached whole as the partition of every date before the first
# week partition (no row is copied; its (id, date) key is built and its dates checked once), the parent gets
# the same columns, indexes and foreign keys under the same names, and the migration fails unless the
# partitioned table holds exactly the rows the old one did. The table is locked for the duration: measured in
# the README (Retention).
#
# Django's model state is unchanged: `id` stays the model's primary key (a delivery is still looked up by id);
# the database's key is (id, date), which ingest's ON CONFLICT names.

from datetime import UTC, datetime, timedelta

from django.db import migrations

PARENT = "deliveries_delivery"
LEGACY = "deliveries_delivery_legacy"
DEFAULT = "deliveries_delivery_default"
PREFIX = "deliveries_delivery_p"
WIDTH = timedelta(days=7)
ORIGIN = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday
AHEAD = timedelta(days=14)
LIKE = "INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION"


def _week_of(moment):
    return ORIGIN + (moment - ORIGIN) // WIDTH * WIDTH


def _literal(moment):
    return f"'{moment.isoformat()}'::timestamptz"


def _shape(cursor, table):
    """Index definitions (but the primary key's) and foreign keys of `table`, by name."""
    cursor.execute(
        """
        SELECT i.relname, pg_get_indexdef(i.oid)
          FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
         WHERE x.indrelid = %s::regclass AND NOT x.indisprimary
         ORDER BY 1
        """,
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = %s::regclass AND contype = 'f' ORDER BY 1",
        [table],
    )
    return indexes, cursor.fetchall()


def partition(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {PARENT} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"SELECT count(*), max(date) FROM {PARENT}")
        rows, newest = cursor.fetchone()
        indexes, foreign_keys = _shape(cursor, PARENT)
        cursor.execute(f"ALTER TABLE {PARENT} RENAME TO {LEGACY}")
        cursor.execute(f"ALTER TABLE {LEGACY} RENAME CONSTRAINT {PARENT}_pkey TO {LEGACY}_pkey")
        for name, _definition in indexes:
            cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{("legacy_" + name)[:63]}"')

        cursor.execute(f"CREATE TABLE {PARENT} (LIKE {LEGACY} {LIKE}) PARTITION BY RANGE (date)")
        cursor.execute(f"ALTER TABLE {PARENT} ADD CONSTRAINT {PARENT}_pkey PRIMARY KEY (id, date)")
        for _name, definition in indexes:
            # The definition names the table by its old name, which is now the parent's.
            cursor.execute(definition)
        for name, definition in foreign_keys:
            cursor.execute(f'ALTER TABLE {PARENT} ADD CONSTRAINT "{name}" {definition}')
        cursor.execute(f"CREATE TABLE {DEFAULT} (LIKE {PARENT} {LIKE})")
        cursor.execute(f"ALTER TABLE {PARENT} ATTACH PARTITION {DEFAULT} DEFAULT")

        now = datetime.now(UTC)
        if rows:
            first_week = _week_of(newest) + WIDTH
            # The key a partition of the parent needs, as a primary key (a plain unique index does not match).
            cursor.execute(f"CREATE UNIQUE INDEX {LEGACY}_id_date ON {LEGACY} (id, date)")
            cursor.execute(
                f"ALTER TABLE {LEGACY} DROP CONSTRAINT {LEGACY}_pkey,"
                f" ADD CONSTRAINT {LEGACY}_pkey PRIMARY KEY USING INDEX {LEGACY}_id_date"
            )
            # Attaching finds the old table's indexes and foreign keys equal to the parent's and adopts them.
            cursor.execute(
                f"ALTER TABLE {PARENT} ATTACH PARTITION {LEGACY} FOR VALUES FROM (MINVALUE) TO ({_literal(first_week)})"
            )
        else:
            cursor.execute(f"DROP TABLE {LEGACY}")
            first_week = _week_of(now)
        week = first_week
        while week <= _week_of(now + AHEAD):
            name = f"{PREFIX}{week:%Y%m%d}"
            cursor.execute(f"CREATE TABLE {name} (LIKE {PARENT} {LIKE})")
            cursor.execute(
                f"ALTER TABLE {PARENT} ATTACH PARTITION {name}"
                f" FOR VALUES FROM ({_literal(week)}) TO ({_literal(week + WIDTH)})"
            )
            week += WIDTH

        cursor.execute(f"SELECT count(*) FROM {PARENT}")
        (after,) = cursor.fetchone()
        if after != rows:
            raise RuntimeError(f"partitioning would change the number of deliveries from {rows} to {after}")


def unpartition(apps, schema_editor):
    """Back to one plain table: every row copied into it, the same indexes and foreign keys, key (id)."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {PARENT} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"SELECT count(*) FROM {PARENT}")
        (rows,) = cursor.fetchone()
        indexes, foreign_keys = _shape(cursor, PARENT)
        plain = f"{PARENT}_plain"
        cursor.execute(f"CREATE TABLE {plain} (LIKE {PARENT} {LIKE})")
        cursor.execute(f"INSERT INTO {plain} SELECT * FROM {PARENT}")
        cursor.execute(f"DROP TABLE {PARENT} CASCADE")
        cursor.execute(f"ALTER TABLE {plain} RENAME TO {PARENT}")
        cursor.execute(f"ALTER TABLE {PARENT} ADD CONSTRAINT {PARENT}_pkey PRIMARY KEY (id)")
        for _name, definition in indexes:
            cursor.execute(definition.replace("ON ONLY ", "ON "))
        for name, definition in foreign_keys:
            cursor.execute(f'ALTER TABLE {PARENT} ADD CONSTRAINT "{name}" {definition}')
        cursor.execute(f"SELECT count(*) FROM {PARENT}")
        (after,) = cursor.fetchone()
        if after != rows:
            raise RuntimeError(f"unpartitioning would change the number of deliveries from {rows} to {after}")


class Migration(migrations.Migration):

    dependencies = [
        ("deliveries", "0010_period_rollup"),
    ]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
