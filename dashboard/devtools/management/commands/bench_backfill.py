from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.deliveries.models import Delivery
from dashboard.devtools.processes import load_average, simulator_source, start, start_simulator, stop
from dashboard.polling.models import HistoryWalk, WalkKind
from dashboard.sources.models import Source


class Command(BaseCommand):
    help = (
        "Run `backfill_history` against a simulator holding --records records and print the backfill process's "
        "resident memory (RSS) every --every records, with its peak. Run it on an empty database: the history "
        "stays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--records", type=int, default=1_000_000)
        parser.add_argument("--every", type=int, default=100_000, help="Print a line every this many records.")
        parser.add_argument("--latency-ms", type=int, default=0, help="Added by the simulator to every answer.")
        parser.add_argument("--history-days", type=int, default=7)

    def handle(self, *args: Any, records: int, every: int, latency_ms: int, history_days: int, **o: Any) -> None:
        if Delivery.objects.exists():
            raise CommandError("run it on an empty, migrated database: it stores the simulator's history there")
        logs = Path(tempfile.mkdtemp(prefix="bench_backfill-"))
        children: list[subprocess.Popen[bytes]] = []
        try:
            # At this rate the window holds about --records records.
            per_minute = records / (history_days * 1440)
            child, url = start_simulator(
                logs / "simulator.log", "--latency-ms", str(latency_ms), "--deliveries-per-minute", f"{per_minute:.4f}",
                "--history-days", str(history_days),
            )
            children.append(child)
            source = simulator_source("bench-backfill", url)
            backfill = start(logs / "backfill.log", ["manage.py", "backfill_history", "--source", source.name,
                                                      "--no-progress"])
            children.append(backfill)
            self._watch(backfill, source, every)
        finally:
            for child in reversed(children):
                stop(child)
            self.stdout.write(f"output of the simulator and the backfill: {logs}")

    def _watch(self, backfill: subprocess.Popen[bytes], source: Source, every: int) -> None:
        self.stdout.write(f"backfill_history (pid {backfill.pid}) of the simulator's history; load {load_average()}")
        self.stdout.write(f"{'records':>10} {'seconds':>8} {'records/s':>10} {'RSS MB':>8} {'peak MB':>8}  load")
        started = time.monotonic()
        next_line, done, rss, peak = every, 0, 0.0, 0.0
        rss_at_lines: list[float] = []
        while backfill.poll() is None:
            memory = _memory(backfill.pid)
            if memory is not None:
                rss, peak = memory
            walk = HistoryWalk.objects.filter(source=source, kind=WalkKind.BACKFILL).first()
            done = walk.records if walk is not None else 0
            if done >= next_line:
                elapsed = time.monotonic() - started
                self.stdout.write(f"{done:>10,} {elapsed:>8,.0f} {done / elapsed:>10,.0f} {rss:>8,.0f} {peak:>8,.0f}"
                                  f"  {load_average()}")
                rss_at_lines.append(rss)
                next_line += every
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        walk = HistoryWalk.objects.filter(source=source, kind=WalkKind.BACKFILL).first()
        done = walk.records if walk is not None else done
        self.stdout.write(f"{done:>10,} {elapsed:>8,.0f} {done / elapsed:>10,.0f} {rss:>8,.0f} {peak:>8,.0f}  {load_average()}"
                          f"  (exit {backfill.returncode})")
        if rss_at_lines:
            self.stdout.write(f"RSS at the printed lines: {min(rss_at_lines):,.0f}–{max(rss_at_lines):,.0f} MB; "
                              f"peak {peak:,.0f} MB")


def _memory(pid: int) -> tuple[float, float] | None:
    """(resident, peak resident) MB of a process, from /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
    except (KeyError, ValueError):
        return None

