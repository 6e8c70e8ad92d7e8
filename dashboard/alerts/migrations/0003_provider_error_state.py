"""The provider's own stream status as an alert condition, on by default: a stream in `error` or
`terminated` at the provider receives nothing until someone reactivates it."""

from django.db import migrations, models

RULE = {
    "name": "Stream down at the provider",
    "condition": "provider_error_state",
    "grace_minutes": 2,
    "cooldown_minutes": 30,
}


def create_rule(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.get_or_create(name=RULE["name"], defaults={k: v for k, v in RULE.items() if k != "name"})


def remove_rule(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.filter(name=RULE["name"], condition=RULE["condition"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("alerts", "0002_default_rules"),
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
                ],
                default="any_failure",
                max_length=24,
            ),
        ),
        migrations.RunPython(create_rule, remove_rule),
    ]
