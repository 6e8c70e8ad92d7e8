"""`manage.py generate_deliveries --count 100000`: realistic delivery rows in bulk, with the derived data
ingest would have written, for trying the admin and the pages on a table of production size and for
checking query plans."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.devtools.generator import generate_deliveries
from dashboard.sources.models import Source


class Command(BaseCommand):
    help = (
        "Insert COUNT realistic deliveries (ERC-20 transfers over 8 streams, a few percent failing) with "
        "one INSERT … SELECT generate_series, then their hourly rollups, stream rows and error-group counts; the "
        "same seed gives the same rows and reruns skip existing ids. --days 90 shapes a long history, --days 1 a "
        "heavy day; --ends-days-ago 98.05 --days 1 a day that retention will drop with its week (its rows get ids of their own, "
        "so the same seed adds it to the same source and streams)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, default=100_000)
        parser.add_argument("--seed", default="gen", help="Rows of different seeds do not collide.")
        parser.add_argument("--days", type=float, default=30, help="Spread the rows over this many days.")
        parser.add_argument(
            "--ends-days-ago", type=float, default=0, metavar="DAYS",
            help="End the span this many days before now (default 0: now); the span gets ids of its own.",
        )
        parser.add_argument("--failure-rate", type=float, default=0.05)
        parser.add_argument(
            "--newest", type=datetime.fromisoformat,
            help="Date of row 0 (ISO 8601, with offset); default: now. Row n is this minus n × days/count.",
        )
        parser.add_argument(
            "--from-row", type=int, default=1,
            help="Start at row N: finishes an interrupted run given the same --count, --days, --seed and --newest.",
        )
        parser.add_argument("--source", help="Name of an existing source; default: a source 'generated-SEED'.")
        parser.add_argument(
            "--hostile", action="store_true", help="Put markup (<script>…) in some error texts, a tag and payloads."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["count"] < 1:
            raise CommandError("--count must be at least 1")
        if options["newest"] is not None and options["newest"].tzinfo is None:
            raise CommandError("--newest needs a UTC offset, e.g. 2026-11-25T04:44:05+00:00")
        if options["ends_days_ago"] < 0:
            raise CommandError("--ends-days-ago must not be negative")
        if not 0 <= options["failure_rate"] <= 1:
            raise CommandError("--failure-rate must be between 0 and 1")
        source = None
        if options["source"]:
            source = Source.objects.filter(name=options["source"]).first()
            if source is None:
                raise CommandError(f"No source named {options['source']!r}.")
        result = generate_deliveries(
            options["count"],
            source=source,
            seed=options["seed"],
            days=options["days"],
            ends_days_ago=options["ends_days_ago"],
            failure_rate=options["failure_rate"],
            hostile=options["hostile"],
            newest=options["newest"],
            from_row=options["from_row"],
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Generated {result.count:,} deliveries for source {result.source.name!r} "
                f"in {result.seconds:.1f} s."
            )
        )
