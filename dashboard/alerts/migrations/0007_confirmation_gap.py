"""Confirmation gaps as an alert condition, off by default: a rule is created disabled, to be switched on
where a receiver acts only on confirmed blocks (the Confirmation gaps page shows the same blocks)."""

from django.db import migrations, models

RULE = {
    "name": "Confirmation gaps",
    "condition": "confirmation_gap",
    # Gaps show only after the chain's finality and the grace period: six hours of blocks.
    "window_minutes": 360,
    "grace_minutes": 30,
    "cooldown_minutes": 60,
    "enabled": False,
}


def create_rule(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.get_or_create(name=RULE["name"], defaults={k: v for k, v in RULE.items() if k != "name"})


def remove_rule(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.filter(name=RULE["name"], condition=RULE["condition"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("alerts", "0006_incident_open_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="alertrule",
            name="condition",
            field=models.CharField(
                choices=[
                    ("any_failure", "Any failed delivery"),
                    ("failure_rate", "Failure rate above a threshold"),
                    ("consecutive", "Consecutive failed deliveries"),
                    ("error_state_risk", "Provider error-state risk (modelled success rate)"),
                    ("poller_stale", "Our poller is stale (dead-man's switch)"),
                    ("provider_error_state", "Stream in error or terminated at the provider (actual)"),
                    (
                        "confirmation_gap",
                        "Confirmation gap (confirmed delivery missing after finality, or failing while the "
                        "unconfirmed one was delivered)",
                    ),
                ],
                default="any_failure",
                max_length=24,
            ),
        ),
        migrations.AlterField(
            model_name="alertrule",
            name="window_minutes",
            field=models.PositiveIntegerField(
                default=15,
                help_text="Any failure / failure rate / confirmation gap: how far back deliveries count (by "
                "delivery date). A confirmation gap shows only after the chain's finality, so give it hours.",
            ),
        ),
        migrations.RunPython(create_rule, remove_rule),
    ]
