"""Default rules, so alerts work as soon as ALERT_EMAILS is set.

Failed deliveries and a stale poller alert out of the box; the provider error-state model is there to be
switched on, since during an outage it fires beside the failed-deliveries rule.
"""

from django.db import migrations

DEFAULT_RULES = [
    {
        "name": "Failed deliveries",
        "condition": "any_failure",
        "window_minutes": 15,
        "grace_minutes": 10,
        "cooldown_minutes": 30,
    },
    {
        "name": "Poller stale",
        "condition": "poller_stale",
        "stale_minutes": 10,
        "grace_minutes": 2,
        "cooldown_minutes": 30,
    },
    {
        "name": "Provider error-state risk",
        "condition": "error_state_risk",
        "threshold_percent": 80,
        "grace_minutes": 15,
        "cooldown_minutes": 60,
        "enabled": False,
    },
]


def create_default_rules(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    for fields in DEFAULT_RULES:
        name = fields["name"]
        AlertRule.objects.get_or_create(name=name, defaults={k: v for k, v in fields.items() if k != "name"})


def remove_default_rules(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.filter(name__in=[r["name"] for r in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]

    operations = [migrations.RunPython(create_default_rules, remove_default_rules)]
