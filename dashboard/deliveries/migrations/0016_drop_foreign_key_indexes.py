"""The foreign keys' own indexes go: no query picks deliveries or rollups by source alone, a group's rows and
slots are read through the (error group, date) and (error group, hour) indexes (the event rollups by event), and
each index costs every insert. Only the indexes
are dropped (Django's AlterField would also drop and re-add the foreign key constraints, re-checking every row of
the deliveries table): a catalog change, measured at 10 M rows in the README's upgrade notes. Reversing builds
them again (on every partition)."""

import django.db.models.deletion
from django.db import migrations, models

# (table, column, index name as Django named it)
INDEXES = [
    ("deliveries_delivery", "error_group_id", "deliveries_delivery_error_group_id_0e0802f6"),
    ("deliveries_delivery", "source_id", "deliveries_delivery_source_id_f8361769"),
    (
        "deliveries_eventperiodrollup",
        "error_group_id",
        "deliveries_eventperiodrollup_error_group_id_7bed1034",
    ),
    ("deliveries_eventperiodrollup", "source_id", "deliveries_eventperiodrollup_source_id_d54eb1a0"),
    ("deliveries_eventrollup", "error_group_id", "deliveries_eventrollup_error_group_id_338ca7eb"),
    ("deliveries_eventrollup", "source_id", "deliveries_eventrollup_source_id_d5b49543"),
    ("deliveries_hourlyrollup", "error_group_id", "deliveries_hourlyrollup_error_group_id_7c664af6"),
    ("deliveries_hourlyrollup", "source_id", "deliveries_hourlyrollup_source_id_c9c4fb85"),
    ("deliveries_periodrollup", "error_group_id", "deliveries_periodrollup_error_group_id_f1e4ff96"),
    ("deliveries_periodrollup", "source_id", "deliveries_periodrollup_source_id_f15a509d"),
]


# The models whose foreign keys lose their index, with the related name of both keys.
MODELS = [("delivery", "deliveries"), *((m, "+") for m in ("eventperiodrollup", "eventrollup", "hourlyrollup", "periodrollup"))]


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0015_rollup_changes"),
        ("sources", "0003_encrypt_api_key"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for table, column, name in INDEXES
            ],
            state_operations=[
                operation
                for model, related_name in MODELS
                for operation in (
                    migrations.AlterField(
                        model_name=model,
                        name="error_group",
                        field=models.ForeignKey(
                            blank=True,
                            db_index=False,
                            null=True,
                            on_delete=django.db.models.deletion.SET_NULL,
                            related_name=related_name,
                            to="deliveries.errorgroup",
                        ),
                    ),
                    migrations.AlterField(
                        model_name=model,
                        name="source",
                        field=models.ForeignKey(
                            db_index=False,
                            on_delete=django.db.models.deletion.CASCADE,
                            related_name=related_name,
                            to="sources.source",
                        ),
                    ),
                )
            ],
        ),
    ]
