# Source and HistoryWalk now belong to the sources and polling apps; their tables and rows stay as they are.
# The content types move with them, so permissions granted on sources (and admin history) follow.

import django.db.models.deletion
from django.db import migrations, models

MOVED = {"source": "sources", "historywalk": "polling"}


def _move(apps, old_label_of, new_label_of):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, app in MOVED.items():
        old, new = old_label_of(app), new_label_of(app)
        if content_type.objects.filter(app_label=new, model=model).exists():
            continue
        content_type.objects.filter(app_label=old, model=model).update(app_label=new)


def move_content_types(apps, schema_editor):
    _move(apps, lambda app: "deliveries", lambda app: app)


def move_content_types_back(apps, schema_editor):
    _move(apps, lambda app: app, lambda app: "deliveries")


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('accounts', '0002_roles'),
        ('polling', '0001_initial'),
        ('deliveries', '0003_payload_lz4'),
        ('sources', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table exists already; only Django's idea of which app owns it changes.
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='delivery',
                    name='source',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='sources.source'),
                ),
                migrations.AlterField(
                    model_name='hourlyrollup',
                    name='source',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sources.source'),
                ),
                migrations.AlterField(
                    model_name='stream',
                    name='source',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='streams', to='sources.source'),
                ),
                migrations.DeleteModel(
                    name='HistoryWalk',
                ),
                migrations.DeleteModel(
                    name='Source',
                ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
