"""Each error group's stored deliveries per stream (`ErrorGroupStream`), counted from the deliveries under the
writers' lock (`write_lock.INGEST_LOCK_KEY`), so a poll running beside the migration cannot write between the
count and the table: from then on every writer keeps them (`grouping.apply_group_changes`). Reads the failing rows
alone (the failing rows' index): 8 s for 500 k of them at 10 M deliveries."""

import django.db.models.deletion
from django.db import migrations, models

FILL = """
SELECT pg_advisory_xact_lock(4170031001);
INSERT INTO deliveries_errorgroupstream (error_group_id, stream_id, delivery_count)
SELECT error_group_id, stream_id, count(*) FROM deliveries_delivery
 WHERE error_group_id IS NOT NULL GROUP BY error_group_id, stream_id;
"""


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0023_outage_window_audit")]

    operations = [
        migrations.CreateModel(
            name="ErrorGroupStream",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("stream_id", models.CharField(max_length=64)),
                ("delivery_count", models.PositiveIntegerField(default=0)),
                (
                    "error_group",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="stream_counts",
                        to="deliveries.errorgroup",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("error_group", "stream_id"), name="errorgroupstream_group_stream")
                ],
            },
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
    ]
