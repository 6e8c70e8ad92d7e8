"""`manage.py import_config FILE [--dry-run] [--prune]`: make the alert rules, channels, maintenance windows
and streams' own objectives what the YAML file says (README, Configuration as code).

Prints what it creates, changes and removes (`--dry-run`: what it would, writing nothing); removes nothing
without `--prune`; refuses the whole file, naming each entry and field, when any entry is not valid."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.alerts import config_file


class Command(BaseCommand):
    help = "Apply a configuration file written by export_config (or by hand)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the YAML file, or - for standard input")
        parser.add_argument("--dry-run", action="store_true", help="print what would change; change nothing")
        parser.add_argument("--prune", action="store_true", help="also remove what the file does not name")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"{name}: {exc.strerror}") from None
        try:
            outcome = config_file.apply(
                config_file.load(text), prune=options["prune"], dry_run=options["dry_run"]
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
