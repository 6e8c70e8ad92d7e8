from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet

from dashboard.deliveries.locks import exclusive, source_lock_name
from dashboard.deliveries.models import Source
from dashboard.deliveries.poll import poll
from dashboard.deliveries.sources import enabled_sources, ensure_default_source
from dashboard.upstream.errors import UpstreamError


class Command(BaseCommand):
    help = "Poll the upstream delivery history of every enabled source into the database, in the foreground."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Poll once and exit (default: every POLL_INTERVAL_SECONDS).")
        parser.add_argument("--source", help="Only this source (by name).")

    def handle(self, *args: Any, once: bool = False, source: str | None = None, **options: Any) -> None:
        ensure_default_source()
        sources = enabled_sources()
        if source:
            sources = sources.filter(name=source)
        if not sources.exists():
            raise CommandError("No enabled source: set MORALIS_API_KEY or add a source in the admin.")
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
        """Poll every source once; True when any of them failed."""
        failed = False
        for item in sources:
            # The same lock as the worker's poll task: one walk of a source's checkpoints at a time.
            with exclusive(source_lock_name(item.pk), timeout=settings.CELERY_TASK_TIME_LIMIT) as held:
                if held is None:
                    self.stdout.write(f"{item.name}: a poll is already running; skipped")
                    continue
                try:
                    result = poll(item)
                except UpstreamError as exc:
                    failed = True
                    self.stderr.write(f"{item.name}: {exc.message}")
                    continue
            self.stdout.write(
                f"{item.name}: {result.pages} pages, {result.stored.inserted} new, "
                f"{result.stored.updated} updated, {result.stored.unchanged} unchanged, "
                f"{len(result.stored.rejected)} rejected"
                + ("" if result.complete else " (incomplete: continues next run)")
            )
        return failed
