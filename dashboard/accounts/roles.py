"""The three roles, as Django groups: Team members read the dashboard for their teams' streams, Viewers read
it for every stream, Staff also run the admin (and see every stream).

The groups and their permissions are created by a data migration and kept in step after every
`migrate` (models added later, such as the alert rules, join the Staff group then). Permissions an
operator grants by hand are never taken away.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import DEFAULT_DB_ALIAS, transaction

TEAM_MEMBERS = "Team members"
VIEWERS = "Viewers"
STAFF = "Staff"

VIEW_DASHBOARD = "accounts.view_dashboard"
MANAGE_DASHBOARD = "accounts.manage_dashboard"
VIEW_ALL_STREAMS = "accounts.view_all_streams"

# "app.codename", or "app.*" for every permission of an app. Deliveries, error groups and hourly
# rollups come from upstream and are only ever viewed; users are managed by superusers.
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    # Read the dashboard, narrowed to the streams of the user's teams.
    TEAM_MEMBERS: (VIEW_DASHBOARD,),
    VIEWERS: (VIEW_DASHBOARD, VIEW_ALL_STREAMS),
    STAFF: (
        VIEW_DASHBOARD,
        MANAGE_DASHBOARD,
        VIEW_ALL_STREAMS,
        "deliveries.view_delivery",
        "deliveries.view_errorgroup",
        "sources.view_source",
        "sources.add_source",
        "sources.change_source",
        "alerts.*",
        "expectations.*",
        # Replays and status changes at the provider, and reading their audit.
        "actions.act_at_provider",
        "actions.view_provideraction",
        "actions.view_replayitem",
        "auth.view_user",
        "auth.view_group",
        # Teams and who is in them.
        "accounts.view_team",
        "accounts.add_team",
        "accounts.change_team",
        "accounts.delete_team",
        "accounts.view_teammembership",
        "accounts.add_teammembership",
        "accounts.change_teammembership",
        "accounts.delete_teammembership",
        # API tokens for service accounts (no more than the staff member holds) and revoking any.
        "api.view_apitoken",
        "api.add_apitoken",
        "api.change_apitoken",
    ),
}
ROLES = tuple(ROLE_PERMISSIONS)


def sync_roles(apps: Any = global_apps, using: str = DEFAULT_DB_ALIAS) -> None:
    """Create the groups if missing and add the permissions they should have. Idempotent."""
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    with transaction.atomic(using=using):
        for name, wanted in ROLE_PERMISSIONS.items():
            group, _ = group_model.objects.using(using).get_or_create(name=name)
            permissions = []
            for spec in wanted:
                app_label, _, codename = spec.partition(".")
                found = permission_model.objects.using(using).filter(content_type__app_label=app_label)
                if codename != "*":
                    found = found.filter(codename=codename)
                # A permission of an app that is not installed (yet) is skipped, not an error.
                permissions.extend(found)
            group.permissions.add(*permissions)


def sync_roles_in_migration(apps: Any, schema_editor: Any) -> None:
    """For the roles migrations: permissions are normally created after all migrations have run; they are
    created here first so the groups can be filled on a fresh database."""
    using = schema_editor.connection.alias
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, using=using, apps=apps)
        app_config.models_module = None
    sync_roles(apps, using)


def sync_roles_after_migrate(
    *, apps: Any = global_apps, using: str = DEFAULT_DB_ALIAS, **kwargs: Any
) -> None:
    # Permissions are created per app by another post_migrate handler, in INSTALLED_APPS order; make sure
    # those of apps after this one exist before the groups are filled.
    for app_config in global_apps.get_app_configs():
        create_permissions(app_config, verbosity=0, using=using, apps=apps)
    sync_roles(global_apps, using)


def assign_role(user: Any, role: str) -> None:
    """Put the user in exactly one of the role groups; Staff also get the admin (is_staff)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    from django.contrib.auth.models import Group

    sync_roles()
    user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=role))
    user.groups.add(Group.objects.get(name=role))
    if user.is_staff != (role == STAFF):
        user.is_staff = role == STAFF
        user.save(update_fields=["is_staff"])


def clear_role(user: Any) -> None:
    """Take the user out of every role group (no access: the "No access" page); no admin either."""
    from django.contrib.auth.models import Group

    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if user.is_staff:
        user.is_staff = False
        user.save(update_fields=["is_staff"])
