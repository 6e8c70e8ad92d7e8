# HistoryWalk moved here from the deliveries app, keeping its table (deliveries_historywalk) and every row.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('deliveries', '0003_payload_lz4'),
        ('sources', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table exists already; only Django's idea of which app owns it changes.
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='HistoryWalk',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('head', 'Head poll'), ('revisit', 'Retry-window revisit'), ('backfill', 'Backfill')], max_length=16)),
                        ('cursor', models.TextField(blank=True)),
                        ('top_date', models.DateTimeField(blank=True, null=True)),
                        ('stop_before', models.DateTimeField(blank=True, null=True)),
                        ('pages', models.PositiveIntegerField(default=0)),
                        ('records', models.PositiveIntegerField(default=0)),
                        ('upstream_total', models.PositiveIntegerField(blank=True, null=True)),
                        ('started_at', models.DateTimeField()),
                        ('updated_at', models.DateTimeField()),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('source', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='walks', to='sources.source')),
                    ],
                    options={
                        'db_table': 'deliveries_historywalk',
                        'constraints': [models.UniqueConstraint(fields=('source', 'kind'), name='walk_source_kind')],
                    },
                ),
            ],
        ),
    ]
