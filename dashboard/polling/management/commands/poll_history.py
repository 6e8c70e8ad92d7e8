from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet

from dashboard.polling.jobs import poll_source
from dashboard.sources.defaults import NoSource, sources_to_poll
from dashboard.sources.models import Source


class Command(BaseCommand):
    help = "Poll the upstream delivery history of every enabled source into the database, in the foreground."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Poll once and exit (default: every POLL_INTERVAL_SECONDS).")
        parser.add_argument("--source", help="Only this source (by name).")

    def handle(self, *args: Any, once: bool = False, source: str | None = None, **options: Any) -> None:
        try:
            sources = sources_to_poll(source)
        except NoSource as exc:
            raise CommandError(str(exc)) from exc
        try:
            while True:
                failed = self._poll_each(sources)
                if once:
                    if failed:
                        raise CommandError("Polling failed for at least one source.")
                    return
                time.sleep(settings.POLL_INTERVAL_SECONDS)
        except KeyboardInterrupt:
            # Every page is stored with its checkpoint, so stopping anywhere loses nothing.
            self.stdout.write("stopped; the next poll continues from the checkpoint")

    def _poll_each(self, sources: QuerySet[Source]) -> bool:
        """Poll every source once, as the worker's task does; True when any of them failed."""
        failed = False
        for item in sources:
            run = poll_source(item)
            if run.error:
                failed = True
                self.stderr.write(run.summary)
            else:
                self.stdout.write(run.summary)
        return failed
