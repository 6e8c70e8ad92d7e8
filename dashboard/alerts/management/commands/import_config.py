"""`manage.py import_config FILE [--dry-run] [--prune] [--user NAME]`: make the alert rules, channels, maintenance
windows and streams' own objectives what the YAML file says (README, Configuration as code).

Prints what it creates, changes and removes (`--dry-run`: what it would, writing nothing); removes nothing
without `--prune`; refuses the whole file, naming each entry and field, when any entry is not valid. With
`--user`, each change is also written to the admin's history as that user."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Model

from dashboard.alerts import config_file


class Command(BaseCommand):
    help = "Apply a configuration file written by export_config (or by hand)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the YAML file, or - for standard input")
        parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
        parser.add_argument("--prune", action="store_true", help="also remove what the file does not name")
        parser.add_argument(
            "--user", default="", help="write each change to the admin's history as this user (e.g. the deploy's)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"{name}: {exc.strerror}") from None
        audit = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"--user: no user named {options['user']}")
            audit = partial(_log, user.pk, name)
        try:
            outcome = config_file.apply(
                config_file.load(text), prune=options["prune"], dry_run=options["dry_run"], audit=audit
            )
        except config_file.ConfigError as exc:
            raise CommandError(
                f"{name}: nothing was changed:\n" + "\n".join(f"  {line}" for line in exc.problems)
            ) from None
        for change in outcome.changes:
            self.stdout.write(change.text(dry_run=options["dry_run"]))
        for what in outcome.kept:
            self.stdout.write(f"kept {what}: not in the file (--prune removes it)")
        counts = {verb: sum(c.verb == verb for c in outcome.changes) for verb in ("create", "change", "remove")}
        summary = ", ".join(f"{n} to {verb}" for verb, n in counts.items())
        if not outcome.changes:
            self.stdout.write("Nothing to change.")
        elif options["dry_run"]:
            self.stdout.write(f"Dry run: {summary}; nothing was written.")
        else:
            self.stdout.write(f"Applied: {summary}.")


def _log(user_id: int, file_name: str, obj: Model, change: config_file.Change) -> None:
    """The admin's history entry of one change: the object, the action and the fields changed (never a value of a
    secret), and where it came from."""
    flag = {"create": ADDITION, "change": CHANGE, "remove": DELETION}[change.verb]
    said = {"create": "Added.", "remove": "Deleted."}.get(
        change.verb, "Changed " + ", ".join(name for name, _, _ in change.fields) + "."
    )
    LogEntry.objects.log_actions(
        user_id=user_id, queryset=[obj], action_flag=flag,
        change_message=f"{said} Through import_config ({Path(file_name).name[:60]}).", single_object=True,
    )
