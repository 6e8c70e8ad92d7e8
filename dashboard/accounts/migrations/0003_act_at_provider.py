"""Staff may act at the provider (replay deliveries, change a stream's status) and read the audit."""

from django.db import migrations


def grant(apps, schema_editor):
    from dashboard.accounts.roles import sync_roles_in_migration

    sync_roles_in_migration(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_roles"),
        ("actions", "0002_append_only"),
        # After the move of Source and HistoryWalk, so the content types it creates are the moved ones.
        ("deliveries", "0005_stream_provider_state"),
        ("sources", "0002_streams_sync_state"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
