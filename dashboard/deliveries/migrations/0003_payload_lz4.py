# Payloads are most of the table: lz4 TOAST compression writes them ~1.7x faster than pglz at about the
# same size. Servers built without lz4 (or older than 14) keep the default compression.

from django.db import migrations

SET_LZ4 = """
DO $$
BEGIN
    ALTER TABLE deliveries_delivery ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE deliveries_delivery ALTER COLUMN tiny_payload SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 TOAST compression unavailable (%), keeping the default', SQLERRM;
END
$$;
"""

SET_DEFAULT = """
DO $$
BEGIN
    ALTER TABLE deliveries_delivery ALTER COLUMN payload SET COMPRESSION default;
    ALTER TABLE deliveries_delivery ALTER COLUMN tiny_payload SET COMPRESSION default;
EXCEPTION WHEN OTHERS THEN
    NULL;
END
$$;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("deliveries", "0002_walks_streams_sync_state"),
    ]

    operations = [migrations.RunSQL(SET_LZ4, SET_DEFAULT)]
