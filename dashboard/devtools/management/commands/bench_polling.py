from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from subprocess import Popen
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from dashboard.deliveries.models import Delivery
from dashboard.devtools.processes import load_average, simulator_source, start, start_simulator, stop
from dashboard.polling.tasks import poll_source_task
from dashboard.sources.models import Source


@dataclass
class Tracked:
    """What the benchmark saw of one source."""

    source: Source
    rate: float  # new history records a second at its simulator
    caught_up_at: float | None = None
    caught_up_rows: int = 0
    rows: int = 0
    steady_start_rows: int = 0
    steady_start: datetime = datetime.max.replace(tzinfo=UTC)
    last_success: datetime | None = None
    # (start, end) of every successful poll that ended during the steady phase
    polls: list[tuple[datetime, datetime]] = field(default_factory=list)
    errors: set[str] = field(default_factory=set)


class Command(BaseCommand):
    help = (
        "Poll several simulated sources with Celery workers as in production (the Procfile's worker_polls line) "
        "and print records/s per source and in total while each catches up with its history, then whether each "
        "poll keeps up with the simulator's rate of new history. Starts one simulator per source and the workers "
        "itself, and stops them at the end. Run it on an empty database: the sources and their history stay."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sources", type=int, default=4)
        parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (-Q polls).")
        parser.add_argument("--concurrency", type=int, default=2, help="--concurrency of each worker.")
        parser.add_argument("--latency-ms", type=int, default=300, help="Added by each simulator to every answer.")
        parser.add_argument("--rate", type=float, default=0.5, help="New history records a second per source.")
        parser.add_argument("--history-days", type=int, default=1, help="History each simulator holds at the start.")
        parser.add_argument("--steady", type=float, default=330.0, help="Seconds measured after every source caught up.")
        parser.add_argument("--interval", type=float, default=float(settings.POLL_INTERVAL_SECONDS),
                            help="Seconds between polls of a source (what beat does every POLL_INTERVAL_SECONDS).")
        parser.add_argument("--timeout", type=float, default=1800.0, help="Give up catching up after this long.")

    def handle(self, *args: Any, **o: Any) -> None:
        if Delivery.objects.exists():
            raise CommandError("run it on an empty, migrated database: it stores every simulator's history there")
        children: list[Popen[bytes]] = []
        logs = Path(tempfile.mkdtemp(prefix="bench_polling-"))
        try:
            self._run(children, logs, o)
        finally:
            for child in reversed(children):  # the workers first, then the simulators
                stop(child)
            self.stdout.write(f"output of the simulators and workers: {logs}")

    def _run(self, children: list[Popen[bytes]], logs: Path, o: dict[str, Any]) -> None:
        count, rate = o["sources"], o["rate"]
        tracked = []
        for n in range(count):
            child, url = start_simulator(
                logs / f"simulator-{n + 1}.log", "--seed", str(n + 1), "--latency-ms", str(o["latency_ms"]),
                "--deliveries-per-minute", str(rate * 60), "--history-days", str(o["history_days"]),
            )
            children.append(child)
            tracked.append(Tracked(simulator_source(f"bench-{n + 1}", url), rate))
        for n in range(o["workers"]):
            children.append(start(logs / f"worker-{n + 1}.log", [
                "-m", "celery", "-A", "dashboard", "worker", "-Q", "polls", "--concurrency", str(o["concurrency"]),
                "--hostname", f"bench{n + 1}@%h", "--loglevel", "WARNING",
            ]))
        self.stdout.write(
            f"{count} sources (a simulator each: {o['latency_ms']} ms a request, {rate:g} new records/s, "
            f"{o['history_days']} day(s) of history), {o['workers']} Celery workers x {o['concurrency']}, "
            f"a poll of every source every {o['interval']:g} s; load average {load_average()}"
        )
        started = time.monotonic()
        next_poll = started
        steady_from: float | None = None
        while True:
            now = time.monotonic()
            if now >= next_poll:
                for t in tracked:
                    poll_source_task.apply_async(args=[t.source.pk], expires=o["interval"] * 2)
                next_poll = now + o["interval"]
            self._sample(tracked, now, started, steady_from)
            if steady_from is None and all(t.caught_up_at is not None for t in tracked):
                steady_from = now
                for t in tracked:
                    t.steady_start_rows, t.steady_start = t.rows, timezone.now()
                self._report_catch_up(tracked, started, steady_from)
                self.stdout.write(f"steady phase: {o['steady']:g} s ...")
            if steady_from is not None and now - steady_from >= o["steady"]:
                break
            if steady_from is None and now - started > o["timeout"]:
                raise CommandError(f"not every source caught up within {o['timeout']:g} s")
            time.sleep(1.0)
        self._report_steady(tracked, now - steady_from, o["interval"])

    def _sample(self, tracked: list[Tracked], now: float, started: float, steady_from: float | None) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT source_id, count(*) FROM deliveries_delivery WHERE source_id = ANY(%s) GROUP BY source_id",
                [[t.source.pk for t in tracked]],
            )
            counts = dict(cursor.fetchall())
        for t in tracked:
            t.rows = counts.get(t.source.pk, 0)
            t.source.refresh_from_db()
            s = t.source
            if s.last_error_message:
                t.errors.add(s.last_error_message[:120])
            if t.caught_up_at is None and s.synced_through is not None:
                t.caught_up_at, t.caught_up_rows = now, t.rows
                self.stdout.write(f"  {s.name}: caught up after {now - started:,.0f} s ({t.rows:,} records)")
            if steady_from is None:
                t.last_success = s.last_success_at
                continue
            if s.last_success_at != t.last_success and s.last_success_at and s.last_poll_started_at:
                t.last_success = s.last_success_at
                # Only polls started in the steady phase (the one that caught up may end just after it began).
                if s.last_poll_started_at >= t.steady_start:
                    t.polls.append((s.last_poll_started_at, s.last_success_at))

    def _report_catch_up(self, tracked: list[Tracked], started: float, done: float) -> None:
        self.stdout.write(f"catching up (the first head walk of each source reads its whole history); load {load_average()}")
        for t in tracked:
            assert t.caught_up_at is not None
            seconds = t.caught_up_at - started
            self.stdout.write(f"  {t.source.name}: {t.caught_up_rows:,} records in {seconds:,.0f} s = "
                              f"{t.caught_up_rows / seconds:,.0f} records/s")
        total = sum(t.caught_up_rows for t in tracked)
        self.stdout.write(f"  all sources: {total:,} records in {done - started:,.0f} s = "
                          f"{total / (done - started):,.0f} records/s")

    def _report_steady(self, tracked: list[Tracked], seconds: float, interval: float) -> None:
        self.stdout.write(f"steady phase, {seconds:,.0f} s; load {load_average()}")
        behind = []
        for t in tracked:
            new = t.rows - t.steady_start_rows
            took = [(end - start).total_seconds() for start, end in t.polls]
            line = (
                f"  {t.source.name}: {new:,} new records ({new / seconds:.2f}/s, the simulator makes {t.rate:g}/s); "
                f"{len(t.polls)} polls"
            )
            late = _left_behind(t)
            if took:
                line += (
                    f", seconds each: median {statistics.median(took):.1f}, max {max(took):.1f}; records upstream "
                    f"when a poll started that it did not store: {late}"
                )
            self.stdout.write(line)
            for error in sorted(t.errors):
                self.stdout.write(f"    error recorded: {error}")
            if not took or late or max(took) > interval:
                behind.append(t.source.name)
        self.stdout.write(
            "every poll stored all the history there was when it started, within the interval" if not behind
            else f"behind the simulator's new history: {', '.join(behind)}"
        )


def _left_behind(t: Tracked) -> int:
    """Records dated at or before a poll's start (so upstream then) that were stored only after its end.

    The simulator's clock is the real clock (speed 1), so a record's date is when it appeared upstream."""
    with connection.cursor() as cursor:
        late = 0
        for start, end in t.polls:
            cursor.execute(
                "SELECT count(*) FROM deliveries_delivery WHERE source_id = %s AND date <= %s AND first_seen_at > %s",
                [t.source.pk, start, end],
            )
            late += int(cursor.fetchone()[0])
    return late
