"""The failing rows' index carries the status and the stream, so that counting a status of the failing rows, or
a stream's failing rows in a window, is an index-only scan. Rebuilt on every partition in one transaction (it
reads every row to find the failing ones), during which ingest waits."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0018_error_message_indexes")]

    operations = [
        migrations.RemoveIndex(model_name="delivery", name="delivery_failed_date"),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                fields=["date"], include=["status", "stream_id"], condition=~Q(status="delivered"),
                name="delivery_failed_date",
            ),
        ),
    ]
