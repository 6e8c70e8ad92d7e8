"""Evaluate alert rules and send pending mails and channel messages from the command line, without Celery.

`manage.py sendalerts --once` runs one sweep (conditions, grace periods, digests) and sends every message
the outbox has due — new ones, and those whose task or sender was lost; without --once it repeats every
ALERT_SWEEP_SECONDS.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from dashboard.alerts import evaluate, outbox


class Command(BaseCommand):
    help = "Evaluate alert rules and send the resulting mails and channel messages."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one sweep and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            while True:
                evaluate.sweep()
                for name, pk, outcome in outbox.send_due():
                    self.stdout.write(f"{name} message {pk}: {outcome}")
                if options["once"]:
                    return
                time.sleep(settings.ALERT_SWEEP_SECONDS)
        except KeyboardInterrupt:
            # A message is claimed under its lease before it is sent; one interrupted mid-send is picked up by
            # the next sweep once its lease lapses.
            self.stdout.write("stopped")
