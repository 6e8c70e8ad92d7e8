from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.deliveries.latency_fill import fill_latencies
from dashboard.upstream.parsing import as_datetime


class Command(BaseCommand):
    help = (
        "Fill the block time and processing latency of deliveries stored before they were kept, from their payloads, "
        "six hours per transaction from the newest, and recompute those hours' rollups; safe to run while polls run, "
        "and to stop and resume."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--before", default=None, help="Resume: fill only deliveries dated before this moment (ISO 8601, UTC)."
        )

    def handle(self, *args: Any, before: str | None, **options: Any) -> None:
        until: datetime | None = None
        if before:
            until = as_datetime(before)
            if until is None:
                raise CommandError(f"--before: not a date: {before!r}")
        total = periods = 0
        for step in fill_latencies(before=until):
            total += step.filled
            periods += 1
            if step.filled or periods % 20 == 0:
                self.stdout.write(
                    f"{step.start:%Y-%m-%d %H:%M} UTC: {step.filled:,} filled, {total:,} so far "
                    f"(resume with --before {step.start:%Y-%m-%dT%H:%M:%SZ})"
                )
        self.stdout.write(self.style.SUCCESS(f"Done: {total:,} deliveries filled over {periods:,} periods."))
