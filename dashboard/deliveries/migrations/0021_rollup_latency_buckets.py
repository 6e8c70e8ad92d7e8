"""The latency histograms of the hourly, period and stream period rollups (`latency.py`): nullable arrays with no
default, so adding them changes only the catalog; `fill_latencies` (or `rebuild_derived`) fills the rows written
before."""

import django.contrib.postgres.fields
from django.db import migrations, models


def _histogram() -> django.contrib.postgres.fields.ArrayField:
    return django.contrib.postgres.fields.ArrayField(
        base_field=models.IntegerField(), blank=True, null=True, size=None
    )


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0020_delivery_block_time_latency")]

    operations = [
        migrations.AddField(model_name=model, name=name, field=_histogram())
        for model in ("hourlyrollup", "periodrollup", "streamperiodrollup")
        for name in ("latency_unconfirmed", "latency_confirmed")
    ]
