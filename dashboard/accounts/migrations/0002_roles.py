"""Create the Viewers and Staff groups with their permissions.

Permissions are normally created after all migrations have run; they are created here first so the
groups can be filled on a fresh database. Models added later get into the groups through the
post_migrate hook in dashboard.accounts.apps.
"""

from django.db import migrations


def create_roles(apps, schema_editor):
    from dashboard.accounts.roles import sync_roles_in_migration

    sync_roles_in_migration(apps, schema_editor)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["Viewers", "Staff"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("deliveries", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
