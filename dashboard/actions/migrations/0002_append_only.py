"""The audit is append-only: the database refuses to delete an action or one of its replayed deliveries."""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION actions_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit of actions at the provider is append-only: % rows are never deleted', TG_TABLE_NAME;
END;
$$;
"""

TRIGGERS = [
    "CREATE TRIGGER provideraction_append_only BEFORE DELETE ON actions_provideraction "
    "FOR EACH ROW EXECUTE FUNCTION actions_refuse_delete();",
    "CREATE TRIGGER replayitem_append_only BEFORE DELETE ON actions_replayitem "
    "FOR EACH ROW EXECUTE FUNCTION actions_refuse_delete();",
]


class Migration(migrations.Migration):

    dependencies = [
        ("actions", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION IF EXISTS actions_refuse_delete();"),
        migrations.RunSQL(
            TRIGGERS,
            [
                "DROP TRIGGER IF EXISTS provideraction_append_only ON actions_provideraction;",
                "DROP TRIGGER IF EXISTS replayitem_append_only ON actions_replayitem;",
            ],
        ),
    ]
