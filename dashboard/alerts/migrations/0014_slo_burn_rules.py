"""The two SLO burn-rate rules, off by default: switched on where the objectives (the SLO_* settings, a stream's
own in the admin) say what the team promises; the stream page shows the budget and burn rates either way."""

from django.db import migrations

RULES = [
    {
        "name": "SLO fast burn",
        "condition": "slo_burn_fast",
        "min_deliveries": 20,
        "grace_minutes": 5,
        "cooldown_minutes": 30,
        "enabled": False,
    },
    {
        "name": "SLO slow burn",
        "condition": "slo_burn_slow",
        "min_deliveries": 20,
        "grace_minutes": 30,
        "cooldown_minutes": 60,
        "enabled": False,
    },
]


def create_rules(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    for rule in RULES:
        AlertRule.objects.get_or_create(name=rule["name"], defaults={k: v for k, v in rule.items() if k != "name"})


def remove_rules(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    for rule in RULES:
        AlertRule.objects.filter(name=rule["name"], condition=rule["condition"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("alerts", "0013_completeness_and_slo_conditions"),
    ]

    operations = [migrations.RunPython(create_rules, remove_rules)]
