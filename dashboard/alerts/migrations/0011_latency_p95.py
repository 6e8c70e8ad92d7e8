"""The latency p95 alert condition and its threshold in seconds."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('alerts', '0010_rename_channeldelivery_channelmessage'),
    ]

    operations = [
        migrations.AddField(
            model_name='alertrule',
            name='latency_seconds',
            field=models.PositiveIntegerField(default=60, help_text="Latency p95: alert when the p95 of the unconfirmed deliveries' processing latency (first attempt minus block time) over the window is above this many seconds."),
        ),
        migrations.AlterField(
            model_name='alertrule',
            name='condition',
            field=models.CharField(choices=[('any_failure', 'Any failed delivery'), ('failure_rate', 'Failure rate above a threshold'), ('consecutive', 'Consecutive failed deliveries'), ('error_state_risk', 'Provider error-state risk (modelled success rate)'), ('poller_stale', "Our poller is stale (dead-man's switch)"), ('provider_error_state', 'Stream in error or terminated at the provider (actual)'), ('confirmation_gap', 'Confirmation gap (confirmed delivery missing after finality, or failing while the unconfirmed one was delivered)'), ('latency_p95', 'p95 processing latency above a threshold')], default='any_failure', max_length=24),
        ),
    ]
