from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dashboard.deliveries.rekey import refresh_search_keys


class Command(BaseCommand):
    help = (
        "Derive the search keys of every stored delivery from its payload again (after an upgrade that "
        "extracts more, such as decoded events); safe to run while polls run, and to stop and resume."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=500, help="Deliveries per transaction.")
        parser.add_argument("--after", type=uuid.UUID, default=None, help="Resume after this delivery id.")

    def handle(self, *args: Any, batch: int, after: uuid.UUID | None, **options: Any) -> None:
        read = changed = 0
        for step in refresh_search_keys(batch_size=max(1, batch), after=after):
            read += step.read
            changed += step.changed
            self.stdout.write(f"{read:,} read, {changed:,} updated (resume with --after {step.last_id})")
        self.stdout.write(self.style.SUCCESS(f"Done: {read:,} deliveries read, {changed:,} updated."))
