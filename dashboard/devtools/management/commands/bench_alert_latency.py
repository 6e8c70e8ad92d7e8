from __future__ import annotations

import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from subprocess import Popen
from typing import Any

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Case, DateTimeField, F, When

from dashboard.alerts import channels
from dashboard.alerts.models import AlertRule, Channel, ChannelKind, Incident
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES
from dashboard.devtools.processes import load_average, simulator_source, start, start_simulator, stop
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll

RULE = "bench: any failure"
# The rule's window: an incident clears a minute after its stream's last failed attempt.
WINDOW = timedelta(minutes=1)


@dataclass
class Arrival:
    at: float
    incident_id: int


class Receiver:
    """A JSON webhook receiver on loopback: when each incident's opening arrived."""

    def __init__(self) -> None:
        self.arrivals: list[Arrival] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.time()
                try:
                    message = json.loads(body)
                except ValueError:
                    message = {}
                if message.get("event") == "incident.opened":
                    with outer.lock:
                        outer.arrivals.append(Arrival(at, int(message["incident"]["id"])))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def latest_attempt() -> Case:
    """A failing delivery's latest attempt at the provider, as the alert conditions place it (its date for the
    first attempt, the published retry schedule after it)."""
    return Case(
        When(retries__lte=0, then=F("date")),
        *(When(retries=k, then=F("date") + timedelta(seconds=ATTEMPT_OFFSETS[k])) for k in range(1, MAX_RETRIES)),
        default=F("date") + timedelta(seconds=ATTEMPT_OFFSETS[-1]),
        output_field=DateTimeField(),
    )


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):.1f} s, p95 {p95:.1f} s, max {ordered[-1]:.1f} s"


class Command(BaseCommand):
    help = (
        "Alert latency through the real processes: from a failed attempt at the provider (a simulator on "
        "loopback, whose receivers fail a share of attempts) to the incident's opening at a JSON webhook "
        "receiver on loopback, through a Celery worker for polls, one for alerts and beat polling every "
        "POLL_INTERVAL_SECONDS (all started here). A rule `any failure` over one minute with no grace and no "
        "cooldown opens an incident per stream at each failure after a quiet minute; each incident's latency "
        "runs from the earliest failed attempt it saw to its message's arrival. p50/p95/max against one poll "
        "interval + 5 s. Needs an empty migrated database and a Redis database of its own (it is emptied)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--incidents", type=int, default=25, help="Stop after this many measured incidents.")
        parser.add_argument("--timeout", type=float, default=1800.0, help="Give up after this many seconds.")
        parser.add_argument("--deliveries-per-minute", type=float, default=30.0)
        parser.add_argument("--failure-rate", type=float, default=0.15,
                            help="Share of the simulator's webhook attempts failing (--sporadic-failure-rate).")

    def handle(self, *args: Any, **o: Any) -> None:
        if Delivery.objects.exists():
            raise CommandError("run it on an empty, migrated database: it stores the simulator's history there")
        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
        # A SIGTERM stops the children too (the finally below).
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
        children: list[Popen[bytes]] = []
        logs = Path(tempfile.mkdtemp(prefix="bench_alert_latency-"))
        receiver = Receiver()
        try:
            self._run(children, logs, receiver, o)
        finally:
            receiver.close()
            for child in reversed(children):
                stop(child)
            self.stdout.write(f"output of the simulator, workers and beat: {logs}")

    def _run(self, children: list[Popen[bytes]], logs: Path, receiver: Receiver, o: dict[str, Any]) -> None:
        interval = float(settings.POLL_INTERVAL_SECONDS)
        # The scenario's scripted outages two days ahead: every stream active, failing only its share.
        scenario = (datetime.now(UTC) + timedelta(days=2)).isoformat()
        child, url = start_simulator(
            logs / "simulator.log", "--history-days", "1", "--streams", "8", "--scenario-start", scenario,
            "--deliveries-per-minute", str(o["deliveries_per_minute"]),
            "--sporadic-failure-rate", str(o["failure_rate"]),
        )
        children.append(child)
        source = simulator_source("bench-alerts", url)
        caught_up = time.monotonic()
        for _ in range(1000):
            result = poll(source)
            source.refresh_from_db()
            if result.complete and source.synced_through is not None:
                break
        sync_streams(source)
        self.stdout.write(f"history caught up: {Delivery.objects.count():,} deliveries in "
                          f"{time.monotonic() - caught_up:.0f} s")
        hook = Channel(name="bench-receiver", kind=ChannelKind.WEBHOOK)
        channels.store_settings(hook, url=receiver.url, secret="whsec-bench-0123456789abcdef")
        hook.save()
        rule = AlertRule.objects.create(name=RULE, condition="any_failure", recipients="",
                                        window_minutes=int(WINDOW.total_seconds() // 60), grace_minutes=0,
                                        cooldown_minutes=0)
        rule.channels.set([hook])
        measured_from = datetime.now(UTC) + WINDOW
        for name, queues in (("polls", "polls"), ("alerts", "alerts,actions")):
            children.append(start(logs / f"worker-{name}.log", [
                "-m", "celery", "-A", "dashboard", "worker", "-Q", queues, "--concurrency", "2",
                "--hostname", f"bench-{name}@%h", "--loglevel", "WARNING",
            ]))
        children.append(start(logs / "beat.log", [
            "-m", "celery", "-A", "dashboard", "beat", "--schedule", str(logs / "beat-schedule"),
            "--loglevel", "WARNING",
        ]))
        self.stdout.write(
            f"simulator: {o['deliveries_per_minute']:g} deliveries a minute over 8 streams, "
            f"{o['failure_rate']:.0%} of attempts failing; POLL_INTERVAL_SECONDS {interval:g}; the rule's window "
            f"{WINDOW.total_seconds():.0f} s; incidents opened after {measured_from:%H:%M:%S} UTC are measured; "
            f"load average {load_average()}"
        )
        deadline = time.monotonic() + o["timeout"]
        rows: list[tuple[float, float, float, float]] = []
        seen: set[int] = set()
        skipped = 0
        while len(rows) < o["incidents"] and time.monotonic() < deadline:
            time.sleep(2)
            with receiver.lock:
                arrivals = [a for a in receiver.arrivals if a.incident_id not in seen]
            for arrival in arrivals:
                seen.add(arrival.incident_id)
                incident = Incident.objects.get(pk=arrival.incident_id)
                if incident.opened_at < measured_from:
                    skipped += 1
                    continue
                # What the condition saw when it opened the incident: the stream's failed attempts of the window
                # before it; the earliest of them made it hold (the window was clear when the last one resolved).
                failures = list(
                    Delivery.objects.failures().filter(stream_id=incident.stream_id)
                    .annotate(attempt=latest_attempt())
                    .filter(attempt__gte=incident.opened_at - WINDOW, attempt__lte=incident.opened_at)
                    .order_by("attempt").values_list("attempt", "first_seen_at")[:1]
                )
                if not failures:
                    skipped += 1
                    continue
                attempt, stored = failures[0]
                rows.append((
                    arrival.at - attempt.timestamp(),
                    stored.timestamp() - attempt.timestamp(),
                    incident.opened_at.timestamp() - stored.timestamp(),
                    arrival.at - incident.opened_at.timestamp(),
                ))
                self.stdout.write(
                    f"incident {incident.pk} ({incident.label[:40]}): failed attempt {attempt:%H:%M:%S.%f}"[:-3]
                    + f", stored +{rows[-1][1]:.1f} s, opened +{rows[-1][1] + rows[-1][2]:.1f} s, "
                    f"message +{rows[-1][0]:.1f} s"
                )
        if not rows:
            raise CommandError("no incident was measured; see the logs")
        target = interval + 5
        total = [r[0] for r in rows]
        self.stdout.write(
            f"\n{len(rows)} incidents ({skipped} left out: opened before the measurement or before the rule's "
            f"first full window); poll interval {interval:g} s, target under {target:g} s; load average "
            f"{load_average()}"
        )
        self.stdout.write(f"failed attempt → message at the receiver: {quantiles(total)}")
        self.stdout.write(f"  failed attempt → stored by a poll: {quantiles([r[1] for r in rows])}")
        self.stdout.write(f"  stored → incident opened: {quantiles([r[2] for r in rows])}")
        self.stdout.write(f"  incident opened → message at the receiver: {quantiles([r[3] for r in rows])}")
        over = [t for t in total if t >= target]
        self.stdout.write(f"{len(over)} of {len(rows)} at or over the target" + (" !" if over else ""))
