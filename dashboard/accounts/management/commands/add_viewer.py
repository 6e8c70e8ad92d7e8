"""`manage.py add_viewer USERNAME EMAIL [--password P]`: a login that reads the dashboard and nothing else."""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_email
from django.db import transaction

from dashboard.accounts.roles import VIEWERS, assign_role


class Command(BaseCommand):
    help = (
        "Create a viewer: a login that reads the dashboard and the lookup pages but cannot use the admin. "
        "Asks for the password unless --password is given. With --update, an existing user is given "
        "the role and the new password instead."
    )
    role = VIEWERS

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("email")
        parser.add_argument("--password", help="The password; prompted for (twice) when left out.")
        parser.add_argument("--update", action="store_true", help="Update the user if it exists already.")

    def handle(
        self, *args: Any, username: str, email: str, password: str | None, update: bool, **opts: Any
    ) -> None:
        username = username.strip()
        if not username:
            raise CommandError("The username must not be empty.")
        try:
            validate_email(email)
        except ValidationError:
            raise CommandError(f"{email!r} is not an email address.") from None
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is not None and not update:
            raise CommandError(f"User {username!r} exists already; pass --update to change it.")
        if password is None:
            password = self._prompt_password()
        candidate = user or user_model(username=username, email=email)
        try:
            validate_password(password, candidate)
        except ValidationError as exc:
            raise CommandError("Password refused: " + " ".join(exc.messages)) from None
        with transaction.atomic():
            candidate.email = email
            candidate.set_password(password)
            candidate.save()
            assign_role(candidate, self.role)
        verb = "Updated" if user is not None else "Created"
        self.stdout.write(self.style.SUCCESS(f"{verb} {username} in the {self.role} group."))

    def _prompt_password(self) -> str:
        try:
            first = getpass.getpass("Password: ")
            second = getpass.getpass("Password (again): ")
        except (EOFError, KeyboardInterrupt):
            raise CommandError("No password given.") from None
        if first != second:
            raise CommandError("The two passwords differ.")
        if not first:
            raise CommandError("The password must not be empty.")
        return first
