from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from subprocess import Popen
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from dashboard.actions import block_scan
from dashboard.actions.models import ScanState
from dashboard.deliveries import completeness
from dashboard.deliveries.models import Delivery, Stream
from dashboard.devtools.processes import load_average, simulator_source, start_simulator, stop
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll

# The simulator's request log line: "<client> POST /streams/evm/0x89/block/95448009 200 4B 0.4ms".
PREVIEW_LINE = re.compile(r" POST /streams/evm/(0x[0-9a-f]+)/block/(\d+)\S* (\d{3}) ")
PREFIX = "bench-block-scan"
# The simulator's Polygon stream (a 2.1-second chain): an hour of it is ~1,715 blocks.
STREAM_TAG = "treasury-wallets"


class Killed(BaseException):
    """What a SIGKILL of the worker looks like from inside it: nothing after the moment runs."""


def ms(values: list[float]) -> str:
    if not values:
        return "—"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"mean {statistics.fmean(values) * 1000:.2f}, p50 {statistics.median(values) * 1000:.2f}, p95 {p95 * 1000:.2f} ms"


class Command(BaseCommand):
    help = (
        "Find the missing blocks of an outage of --hours on a 2-second chain (the simulator's Polygon stream) "
        "with the real scan (actions/block_scan.run_scan) against a simulator started for it on loopback, with "
        "an added latency and a rate limit: previews/s, wall time, the previews the simulator answered per "
        "block (from its request log), and where a preview's time goes (the request, our write). --kill-after "
        "stops the run after that many previews as a killed worker would, then resumes it. Run it on a database "
        "of its own, migrated and empty: the simulator's day of history is stored there."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hours", type=float, default=1.0, help="Length of the outage window.")
        parser.add_argument("--latency-ms", type=int, default=0, help="Added by the simulator to every answer.")
        parser.add_argument("--rate-limit", type=float, default=0.0,
                            help="Requests per second the simulator answers; beyond it a 429 (0: no limit).")
        parser.add_argument("--in-flight", type=int, default=block_scan.PREVIEWS_IN_FLIGHT,
                            help="Previews a run has in flight at once (PREVIEWS_IN_FLIGHT).")
        parser.add_argument("--kill-after", type=int, default=0,
                            help="Kill the run after this many previews were asked for, then resume it.")
        parser.add_argument("--profile", action="store_true", help="pyinstrument's profile of the run (if installed).")

    def handle(self, *args: Any, **o: Any) -> None:
        if Delivery.objects.exists():
            raise CommandError("run it on an empty, migrated database: it stores the simulator's history there")
        logs = Path(tempfile.mkdtemp(prefix="bench_block_scan-"))
        children: list[Popen[bytes]] = []
        try:
            self._run(children, logs, o)
        finally:
            for child in children:
                stop(child)
            self.stdout.write(f"simulator output: {logs}")

    def _run(self, children: list[Popen[bytes]], logs: Path, o: dict[str, Any]) -> None:
        log = logs / "simulator.log"
        child, url = start_simulator(
            log, "--history-days", "1", "--latency-ms", str(o["latency_ms"]), "--rate-limit", str(o["rate_limit"]),
            "--log-level", "INFO",
        )
        children.append(child)
        source = simulator_source(f"{PREFIX}-{int(time.time())}", url)
        # The window's block range is placed from stored deliveries: store the simulator's history first.
        for _ in range(50):
            result = poll(source)
            source.refresh_from_db()
            if result.complete and source.synced_through is not None:
                break
        sync_streams(source)
        stream = Stream.objects.get(source=source, tag=STREAM_TAG)
        user, _ = User.objects.get_or_create(username=PREFIX)
        now = timezone.now()
        window = completeness.mark_window(stream, now - timedelta(hours=o["hours"] + 2), now - timedelta(hours=2),
                                          "benchmark", user.username, now=now)
        scan = block_scan.prepare_scan(user, window, now=now)
        if not block_scan.confirm_scan(scan, queue=lambda pk: None):
            raise CommandError("the scan was not confirmed")
        chains = list(scan.chains.order_by("chain_id"))
        self.stdout.write(
            f"window {window.start:%H:%M:%S}–{window.end:%H:%M:%S} UTC: "
            + ", ".join(f"chain {c.chain_id} blocks {c.first_block}–{c.last_block} ({c.blocks:,})" for c in chains)
            + f"; simulator latency {o['latency_ms']} ms, rate limit {o['rate_limit'] or 'none'}/s; "
            f"{o['in_flight']} previews in flight; "
            f"load average {load_average()}"
        )
        offset = log.stat().st_size

        http: list[float] = []
        writes: list[float] = []
        real_preview, real_checkpoint = block_scan.preview_block, block_scan._checkpoint
        asked = {"n": 0}

        def timed_preview(*args: Any, **kwargs: Any) -> Any:
            asked["n"] += 1
            if o["kill_after"] and asked["n"] == o["kill_after"] + 1:
                raise Killed
            started = time.perf_counter()
            try:
                return real_preview(*args, **kwargs)
            finally:
                http.append(time.perf_counter() - started)

        def timed_checkpoint(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return real_checkpoint(*args, **kwargs)
            finally:
                writes.append(time.perf_counter() - started)

        block_scan.PREVIEWS_IN_FLIGHT = o["in_flight"]
        block_scan.preview_block = timed_preview  # type: ignore[assignment]
        block_scan._checkpoint = timed_checkpoint  # type: ignore[assignment]
        profiler = None
        if o["profile"]:
            try:
                from pyinstrument import Profiler  # type: ignore[import-not-found]
            except ImportError as exc:
                raise CommandError("--profile needs pyinstrument (pip install pyinstrument)") from exc
            profiler = Profiler(interval=0.0005)
        runs = killed = 0
        waited = 0.0
        started = time.monotonic()
        try:
            if profiler is not None:
                profiler.start()
            while True:
                runs += 1
                try:
                    outcome = block_scan.run_scan(scan.pk)
                except Killed:
                    killed += 1
                    continue
                if outcome.finished:
                    break
                # What the task's re-queue does: the next run after the outcome's wait.
                waited += outcome.retry_in
                time.sleep(outcome.retry_in)
            wall = time.monotonic() - started
            if profiler is not None:
                profiler.stop()
        finally:
            block_scan.preview_block, block_scan._checkpoint = real_preview, real_checkpoint  # type: ignore[assignment]

        scan.refresh_from_db()
        answered: Counter[tuple[str, int]] = Counter()
        statuses: Counter[str] = Counter()
        with log.open("rb") as f:
            f.seek(offset)
            for line in f.read().decode(errors="replace").splitlines():
                found = PREVIEW_LINE.search(line)
                if found:
                    statuses[found.group(3)] += 1
                    if found.group(3) == "200":
                        answered[(found.group(1), int(found.group(2)))] += 1
        planned = {(c.chain_id, n) for c in chains for n in range(c.first_block, c.last_block + 1)}
        per_block = Counter(answered[b] for b in planned)
        extra = sum(1 for b in answered if b not in planned)
        self.stdout.write(
            f"scan {scan.state}: {scan.previewed:,} of {scan.planned:,} previewed, {scan.matched:,} matched, "
            f"{len(block_scan.missing_blocks(scan)):,} missing; {scan.message}"
        )
        self.stdout.write(
            f"wall {wall:.2f} s, {scan.previewed / wall:.1f} previews/s; {runs} run(s) of run_scan "
            f"({killed} killed, {waited:.1f} s waited for a Retry-After or the budget)"
        )
        self.stdout.write(
            "previews the simulator answered per block: "
            + ", ".join(f"{k}× {v:,} blocks" for k, v in sorted(per_block.items()))
            + f"; outside the range {extra}; its answers by status {dict(sorted(statuses.items()))}"
        )
        self.stdout.write(f"per preview — request (preview_block): {ms(http)}; our write (_checkpoint): {ms(writes)}")
        if scan.previewed:
            # The requests overlap (several in flight); the run's own thread writes one answer after another.
            self.stdout.write(
                f"the run's thread: writing {sum(writes):.2f} s ({sum(writes) / wall:.0%} of the wall time), "
                f"waiting for answers and the rest {wall - sum(writes):.2f} s; requests in flight on average "
                f"{sum(http) / wall:.1f}; load average {load_average()}"
            )
        again = sum(n - 1 for n in answered.values() if n > 1)
        if scan.state != ScanState.DONE or 0 in per_block or (again and not killed):
            self.stdout.write("! not every block was previewed exactly once")
        elif again:
            self.stdout.write(f"asked again after the kill: {again} block(s), the previews in flight when it came "
                              f"(at most {o['in_flight']})")
        if profiler is not None:
            self.stdout.write(profiler.output_text(unicode=True, color=False, show_all=False))
