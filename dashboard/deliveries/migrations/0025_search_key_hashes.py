"""The search keys' GIN index holds each key's 64-bit hash instead of its text (`delivery_key_hashes`, an
immutable SQL function over `hashtextextended`): 8 bytes a key where a tx key's text is 69. Searches match the
hashes through the index and then the keys themselves, so a collision finds nothing extra. The keys column
stays as it is (no row is rewritten: row counts and contents are unchanged): the index is dropped and built again
on every partition in one transaction, as `0014` does, and the table analysed: reads go on, writes (polls,
backfills, retention) wait for it, and searches by key read every row until it is built."""

import django.contrib.postgres.indexes
from django.db import migrations
from django.db.models import F

import dashboard.deliveries.querysets

FUNCTION = """
CREATE FUNCTION delivery_key_hashes(keys varchar[]) RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ARRAY(SELECT hashtextextended(k, 0) FROM unnest(keys) AS k) $$;
"""


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0024_error_group_stream_counts")]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION delivery_key_hashes(varchar[]);"),
        migrations.RemoveIndex(model_name="delivery", name="delivery_search_keys"),
        migrations.AddIndex(
            model_name="delivery",
            index=django.contrib.postgres.indexes.GinIndex(
                dashboard.deliveries.querysets.KeyHashes(F("search_keys")), name="delivery_search_hashes"
            ),
        ),
        # The statistics of the index's expression (each hash's share of the rows), which Postgres keeps only once
        # the table is analysed: without them a frequent key's search reads its whole posting list through the
        # index (1.8 s at 2 M for a key in a quarter of the rows) instead of walking the date index.
        migrations.RunSQL("ANALYZE deliveries_delivery;", migrations.RunSQL.noop),
    ]
