"""`manage.py export_config [--output FILE]`: alert rules, channels, maintenance windows and streams' own
objectives as YAML (README, Configuration as code). Channel URLs and secrets are written as environment
references, never their values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.alerts import config_file


class Command(BaseCommand):
    help = "Write the alert rules, channels, maintenance windows and stream objectives as YAML."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", "-o", default="-", help="the file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            text = config_file.dump(config_file.export_document())
        except config_file.ConfigError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        if options["output"] == "-":
            self.stdout.write(text, ending="")
        else:
            Path(options["output"]).write_text(text, encoding="utf-8")
