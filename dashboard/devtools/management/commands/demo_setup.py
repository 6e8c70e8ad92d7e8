from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from dashboard.sources.defaults import ensure_default_source


class Command(BaseCommand):
    help = "Prepare a demo installation: a staff login and the default upstream source. Safe to run again."

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
        self.stdout.write(
            f"{'created' if created else 'updated'} login {username}; "
            f"default source: {source.name if source else 'none (MORALIS_API_KEY unset)'}"
        )
