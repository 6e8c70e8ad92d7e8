# Source moved here from the deliveries app, keeping its table (deliveries_source) and every row.

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('deliveries', '0003_payload_lz4'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table exists already; only Django's idea of which app owns it changes.
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Source',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('api_key', models.CharField(blank=True, max_length=512)),
                        ('streams_base_url', models.URLField(max_length=300)),
                        ('evm_base_url', models.URLField(max_length=300)),
                        ('aptos_mainnet_base_url', models.URLField(max_length=300)),
                        ('aptos_testnet_base_url', models.URLField(max_length=300)),
                        ('enabled', models.BooleanField(default=True)),
                        ('is_default', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_poll_started_at', models.DateTimeField(blank=True, null=True)),
                        ('last_success_at', models.DateTimeField(blank=True, null=True)),
                        ('last_error_at', models.DateTimeField(blank=True, null=True)),
                        ('last_error_kind', models.CharField(blank=True, choices=[('rejected_key', 'API key rejected'), ('rate_limited', 'Rate limited'), ('unreachable', 'Upstream unreachable'), ('upstream_error', 'Upstream error'), ('bad_response', 'Malformed upstream response'), ('internal', 'Internal error')], max_length=32)),
                        ('last_error_message', models.TextField(blank=True)),
                        ('consecutive_failures', models.PositiveIntegerField(default=0)),
                        ('key_rejected_at', models.DateTimeField(blank=True, null=True)),
                        ('backoff_until', models.DateTimeField(blank=True, null=True)),
                        ('newest_upstream_date', models.DateTimeField(blank=True, null=True)),
                        ('records_last_poll', models.PositiveIntegerField(default=0)),
                        ('last_revisit_at', models.DateTimeField(blank=True, null=True)),
                        ('synced_through', models.DateTimeField(blank=True, null=True)),
                        ('rejected_key_digest', models.CharField(blank=True, max_length=64)),
                    ],
                    options={
                        'db_table': 'deliveries_source',
                        'ordering': ['name'],
                    },
                ),
            ],
        ),
    ]
