"""Teams from the identity provider's groups claim (OIDC_TEAM_MAP), signed in through the real OpenID Connect
provider on loopback (tests/oidc_provider.py): the user lands in exactly the mapped teams at every sign-in and
sees those teams' streams."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.accounts import oidc
from dashboard.accounts.models import Team, TeamMembership
from dashboard.accounts.roles import STAFF, TEAM_MEMBERS, VIEWERS
from tests.accounts.test_oidc import roles_of, sign_in, signed_in_user
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider
from tests.teams.conftest import STREAM_A, STREAM_B, TAG_A, TAG_B, TwoTeams

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(settings: Any, two_teams: TwoTeams) -> Iterator[Provider]:
    running = Provider().start()
    settings.OIDC_DISCOVERY_URL = running.discovery_url
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_ROLE_MAP = {"ops-admins": STAFF, "ops": VIEWERS}
    settings.OIDC_TEAM_MAP = {"team-alpha": "Alpha", "team-bravo": "Bravo", "team-new": "Newcomers"}
    oidc.forget_discovery()
    yield running
    running.stop()
    oidc.forget_discovery()


def teams_of(user: User) -> set[str]:
    return set(user.teams.values_list("name", flat=True))


def test_a_team_group_makes_a_team_member_who_sees_that_teams_streams(provider: Provider) -> None:
    provider.account.groups = ["team-alpha", "marketing"]
    client = Client()
    assert sign_in(client).status_code == 302
    user = signed_in_user(client)
    assert user is not None
    assert roles_of(user) == {TEAM_MEMBERS} and teams_of(user) == {"Alpha"}
    streams = client.get("/streams/").content.decode()
    assert TAG_A in streams and STREAM_A in streams
    assert TAG_B not in streams and STREAM_B not in streams


def test_every_sign_in_sets_the_provider_teams_again_and_keeps_those_given_by_hand(provider: Provider) -> None:
    provider.account.groups = ["team-alpha"]
    sign_in(Client())
    user = User.objects.get(username="alice")
    extra = Team.objects.create(name="On call")
    TeamMembership.objects.create(team=extra, user=user)

    provider.account.groups = ["team-bravo", "team-new"]
    client = Client()
    sign_in(client)
    assert teams_of(user) == {"Bravo", "Newcomers", "On call"}
    # A team named for the first time is made, owning nothing yet.
    assert Team.objects.get(name="Newcomers").stream_ids == []
    streams = client.get("/streams/").content.decode()
    assert TAG_B in streams and TAG_A not in streams

    provider.account.groups = []
    client = Client()
    sign_in(client)
    assert teams_of(user) == {"On call"}
    # No mapped group left: no role at all.
    assert roles_of(user) == set()
    assert client.get("/streams/").status_code == 403


def test_a_role_group_beside_a_team_group_wins(provider: Provider) -> None:
    """A Viewer sees every stream whatever their teams."""
    provider.account.groups = ["team-alpha", "ops"]
    client = Client()
    sign_in(client)
    user = signed_in_user(client)
    assert user is not None and roles_of(user) == {VIEWERS} and teams_of(user) == {"Alpha"}
    streams = client.get("/streams/").content.decode()
    assert TAG_A in streams and TAG_B in streams
