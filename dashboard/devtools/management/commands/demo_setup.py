from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from dashboard.accounts.models import Team, TeamMembership
from dashboard.accounts.roles import TEAM_MEMBERS, assign_role
from dashboard.alerts.models import AlertRule, Condition
from dashboard.sources.defaults import ensure_default_source

# The demo's rules beside the defaults `migrate` makes: what the simulator's story shows in its first minutes (a
# latency spike on nft-sales, bsc-usdt-payments' quiet hour, the blocks treasury-wallets missed while in error once
# a search finds them). Made once by name; a rule changed or deleted in the admin stays so.
DEMO_RULES: dict[str, dict[str, Any]] = {
    "Slow deliveries (demo)": {"condition": Condition.LATENCY_P95, "window_minutes": 15, "latency_seconds": 120,
                               "min_deliveries": 3, "grace_minutes": 5, "cooldown_minutes": 10},
    "Quiet streams (demo)": {"condition": Condition.QUIET_STREAM, "grace_minutes": 5,
                             "cooldown_minutes": 10},
    "Missing blocks (demo)": {"condition": Condition.MISSING_BLOCKS, "window_minutes": 1440, "grace_minutes": 5,
                              "cooldown_minutes": 10},
}


# Two teams over the simulator's streams, by tag pattern, and a login for a member of the first: signed in as it,
# every page shows the payment streams only. Made once by name; a team changed in the admin stays so.
DEMO_TEAMS: dict[str, list[str]] = {
    "Payments": ["usdc-*", "bsc-usdt-*", "avax-*"],
    "NFT and treasury": ["nft-*", "treasury-*", "polygon-erc1155-*", "arbitrum-mints"],
}
TEAM_LOGIN = "payments"


class Command(BaseCommand):
    help = ("Prepare a demo installation: a staff login, a login of a team member (`payments`, same password), the "
            "default upstream source, the demo's alert rules and teams. Safe to run again.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", required=True)

    def handle(self, *args: Any, username: str, password: str, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username, defaults={"email": f"{username}@localhost"})
        user.is_staff = True
        user.is_superuser = True
        user.set_password(password)
        user.save()
        source = ensure_default_source()
        for name, fields in DEMO_RULES.items():
            AlertRule.objects.get_or_create(name=name, defaults=fields)
        teams = {name: Team.objects.get_or_create(name=name, defaults={"tag_patterns": patterns})[0]
                 for name, patterns in DEMO_TEAMS.items()}
        member, _ = user_model.objects.get_or_create(username=TEAM_LOGIN, defaults={"email": f"{TEAM_LOGIN}@localhost"})
        member.set_password(password)
        member.save()
        assign_role(member, TEAM_MEMBERS)
        TeamMembership.objects.get_or_create(team=teams["Payments"], user=member)
        self.stdout.write(
            f"{'created' if created else 'updated'} login {username}, and {TEAM_LOGIN} (team Payments); "
            f"default source: {source.name if source else 'none (MORALIS_API_KEY unset)'}"
        )
