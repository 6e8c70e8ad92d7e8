"""`manage.py rebuild_derived [--source NAME]`: hourly rollups, stream rows and error-group counts
recomputed from the stored deliveries (after a bulk load, a restore or a manual fix)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.deliveries.rebuild import rebuild_derived
from dashboard.sources.models import Source


class Command(BaseCommand):
    help = (
        "Recompute the hourly rollups, stream rows and error-group counts from the stored deliveries, one day "
        "per transaction; polls may run meanwhile. Rollups of hours with no stored delivery are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", help="Only this source (by name); default: every source.")

    def handle(self, *args: Any, source: str | None = None, **options: Any) -> None:
        source_id = None
        if source:
            found = Source.objects.filter(name=source).first()
            if found is None:
                raise CommandError(f"No source named {source!r}.")
            source_id = found.pk
        started = time.monotonic()

        def progress(day: datetime) -> None:
            if options.get("verbosity", 1) > 1:
                self.stdout.write(f"  {day:%Y-%m-%d} done")

        result = rebuild_derived(source_id, on_day=progress)
        self.stdout.write(
            f"Rebuilt {result.hours:,} stream-hours ({result.rollups:,} rollup rows) and {result.streams:,} "
            f"streams in {time.monotonic() - started:.1f} s."
        )
