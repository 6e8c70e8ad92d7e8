"""Each delivery's block time and processing latency (`latency.py`). Both nullable with no default, so adding
them to the partitioned table changes only the catalog (no row is rewritten); `fill_latencies` fills them for
rows stored before, from their payloads."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0019_failed_index_include")]

    operations = [
        migrations.AddField(
            model_name="delivery", name="block_time", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery", name="latency_ms", field=models.IntegerField(blank=True, null=True),
        ),
    ]
