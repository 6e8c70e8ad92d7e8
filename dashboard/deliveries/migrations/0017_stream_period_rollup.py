"""The period rollups summed per stream, tag, URL, chain and status (`StreamPeriodRollup`), filled from the
period rollups already stored, under the write lock so that no batch commits between the read and the
table's first use by ingest (workers still running the previous code do not write it: stop them while
migrating)."""

import django.db.models.deletion
from django.db import migrations, models

# The write lock's key (`write_lock.INGEST_LOCK_KEY`), written out: a migration keeps its own constants.
FILL = """
SELECT pg_advisory_xact_lock(4170031001);
INSERT INTO deliveries_streamperiodrollup (source_id, hour, stream_id, tag, webhook_url, chain_id, status,
                                          deliveries, retries_sum)
SELECT source_id, hour, stream_id, tag, webhook_url, chain_id, status, sum(deliveries),
       sum(deliveries::bigint * retries)
  FROM deliveries_periodrollup
 GROUP BY source_id, hour, stream_id, tag, webhook_url, chain_id, status;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0016_drop_foreign_key_indexes'),
        ('sources', '0003_encrypt_api_key'),
    ]

    operations = [
        migrations.CreateModel(
            name='StreamPeriodRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('stream_id', models.CharField(max_length=64)),
                ('tag', models.CharField(blank=True, max_length=255)),
                ('webhook_url', models.CharField(max_length=2048)),
                ('chain_id', models.CharField(blank=True, max_length=32)),
                ('status', models.CharField(choices=[('delivered', 'Delivered'), ('retrying', 'Retrying'), ('failed', 'Failed')], max_length=16)),
                ('deliveries', models.PositiveIntegerField()),
                ('retries_sum', models.PositiveBigIntegerField()),
                ('source', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sources.source')),
            ],
            options={
                'indexes': [models.Index(fields=['hour'], name='stream_period_hour'), models.Index(fields=['stream_id', 'hour'], name='stream_period_stream_hour')],
            },
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
    ]
