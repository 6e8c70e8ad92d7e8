"""Roles as groups: created by the migration, kept after flushes, assigned by the commands."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command

from dashboard.accounts import roles
from dashboard.accounts.roles import STAFF, TEAM_MEMBERS, VIEWERS, assign_role, sync_roles


def codenames(group: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=group).permissions.select_related("content_type")
    }


def test_the_migration_creates_the_three_groups(db: None) -> None:
    assert codenames(TEAM_MEMBERS) == {"accounts.view_dashboard"}
    assert codenames(VIEWERS) == {"accounts.view_dashboard", "accounts.view_all_streams"}
    staff = codenames(STAFF)
    assert {
        "accounts.view_dashboard", "accounts.manage_dashboard", "accounts.view_all_streams", "accounts.change_team",
        "accounts.add_teammembership", "deliveries.view_delivery",
        "deliveries.view_errorgroup", "sources.view_source", "sources.add_source",
        "sources.change_source", "auth.view_user",
    } <= staff
    # Upstream data is never changed, users are managed by superusers.
    assert not {"deliveries.change_delivery", "deliveries.delete_delivery", "deliveries.delete_source",
                "auth.add_user", "auth.change_user"} & staff
    # Every permission of the alert models (whatever they are) belongs to staff.
    alerts = {f"alerts.{p.codename}" for p in Permission.objects.filter(content_type__app_label="alerts")}
    assert alerts <= staff


def test_syncing_again_keeps_hand_made_grants(db: None) -> None:
    extra = Permission.objects.get(codename="view_logentry")
    Group.objects.get(name=VIEWERS).permissions.add(extra)
    sync_roles()
    sync_roles()
    assert Group.objects.filter(name__in=roles.ROLES).count() == 3
    assert "admin.view_logentry" in codenames(VIEWERS)


def test_groups_survive_a_flush(transactional_db: None) -> None:
    # Transactional tests flush every table; post_migrate runs again and the groups come back.
    call_command("flush", interactive=False, verbosity=0)
    assert codenames(VIEWERS) == {"accounts.view_dashboard", "accounts.view_all_streams"}
    assert codenames(TEAM_MEMBERS) == {"accounts.view_dashboard"}
    assert "sources.change_source" in codenames(STAFF)


def test_assign_role_switches_group_and_admin_access(db: None) -> None:
    user = User.objects.create_user("switch", "s@example.com", "correct-horse-battery")
    assign_role(user, STAFF)
    assert user.is_staff and list(user.groups.values_list("name", flat=True)) == [STAFF]
    assign_role(user, VIEWERS)
    user = User.objects.get(pk=user.pk)
    assert not user.is_staff and list(user.groups.values_list("name", flat=True)) == [VIEWERS]
    assert user.has_perm(roles.VIEW_DASHBOARD) and not user.has_perm(roles.MANAGE_DASHBOARD)
    with pytest.raises(ValueError, match="unknown role"):
        assign_role(user, "Admins")


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_add_viewer_with_a_password_option(db: None) -> None:
    assert "Created wendy in the Viewers group" in run("add_viewer", "wendy", "wendy@example.com",
                                                       "--password", "long-enough-password")
    user = User.objects.get(username="wendy")
    assert user.check_password("long-enough-password") and user.email == "wendy@example.com"
    assert not user.is_staff and not user.is_superuser
    assert user.has_perm(roles.VIEW_DASHBOARD)


def test_add_viewer_prompts_for_the_password(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["prompted-password-1", "prompted-password-1"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    run("add_viewer", "pat", "pat@example.com")
    assert User.objects.get(username="pat").check_password("prompted-password-1")


def test_add_viewer_refuses_mismatched_prompts(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["prompted-password-1", "prompted-password-2"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(CommandError, match="differ"):
        run("add_viewer", "pat", "pat@example.com")
    assert not User.objects.filter(username="pat").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["wendy", "not-an-email", "--password", "long-enough-password"], "not an email"),
        (["wendy", "w@example.com", "--password", "short"], "Password refused"),
        (["wendy", "w@example.com", "--password", "password"], "Password refused"),
        (["   ", "w@example.com", "--password", "long-enough-password"], "must not be empty"),
    ],
)
def test_add_viewer_refuses_bad_input(db: None, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("add_viewer", *args)
    assert not User.objects.exclude(username="").exists()


def test_add_viewer_does_not_overwrite_without_update(db: None) -> None:
    run("add_viewer", "wendy", "wendy@example.com", "--password", "long-enough-password")
    with pytest.raises(CommandError, match="exists already"):
        run("add_viewer", "wendy", "other@example.com", "--password", "another-long-password")
    assert User.objects.get(username="wendy").check_password("long-enough-password")
    run("add_viewer", "wendy", "other@example.com", "--password", "another-long-password", "--update")
    assert User.objects.get(username="wendy").check_password("another-long-password")


def test_update_demotes_a_staff_member_to_viewer(db: None) -> None:
    run("add_staff", "sam", "sam@example.com", "--password", "long-enough-password")
    sam = User.objects.get(username="sam")
    assert sam.is_staff and sam.has_perm(roles.MANAGE_DASHBOARD)
    run("add_viewer", "sam", "sam@example.com", "--password", "long-enough-password", "--update")
    sam = User.objects.get(username="sam")
    assert not sam.is_staff and not sam.has_perm(roles.MANAGE_DASHBOARD)
