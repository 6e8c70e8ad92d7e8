"""The completeness audit in a terminal: the same planner as beat's hourly task (audit.plan_audits), then each
audit previewed in the foreground under its scan's lease (block_scan.run_scan), as the worker would."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from dashboard.actions import audit, block_scan
from dashboard.actions.models import BlockScan
from dashboard.locks import exclusive


def _moment(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"Not a date and time: {value!r} (e.g. 2026-11-26 or 2026-11-26T06:00, UTC).") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


class Command(BaseCommand):
    help = ("Audit the completeness of every active stream (or those named): preview a random sample of a day's final "
            "blocks and list the missing ones. Without --since/--until, the previous UTC day, like beat's task.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stream", action="append", dest="streams", help="Only this stream id (repeatable).")
        parser.add_argument("--since", help="Start of the stretch to sample, UTC (with --until).")
        parser.add_argument("--until", help="End of the stretch to sample, UTC (with --since).")

    def handle(self, *args: Any, streams: list[str] | None = None, since: str | None = None,
               until: str | None = None, **options: Any) -> None:
        period = None
        if since or until:
            if not (since and until):
                raise CommandError("Give both --since and --until, or neither (the previous UTC day).")
            period = (_moment(since), _moment(until))
            if period[1] <= period[0]:
                raise CommandError("--until must come after --since.")
        # Nothing queued for a worker: the audits made (and any whose task was lost) are run here.
        run = audit.plan_audits(timezone.now(), queue=lambda pk: None, period=period,
                                stream_ids=[s.strip().lower() for s in streams] if streams else None)
        for stream_id, reason in run.skipped.items():
            self.stdout.write(f"{stream_id}: skipped — {reason}")
        for pk in dict.fromkeys(run.queued):
            self._run(pk)

    def _run(self, pk: int) -> None:
        with exclusive(f"block-scan:{pk}") as held:
            if held is None:
                self.stdout.write(f"audit #{pk}: a worker is previewing it; see its window page")
                return
            while not (outcome := block_scan.run_scan(pk)).finished:
                time.sleep(outcome.retry_in)
        scan = BlockScan.objects.select_related("window").get(pk=pk)
        self.stdout.write(f"{scan.stream_id}: {scan.get_state_display()} — {scan.message} "
                          f"({scan.window.get_absolute_url()})")
