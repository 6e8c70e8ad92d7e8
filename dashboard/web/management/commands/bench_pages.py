"""Response times of the main pages and the memory of the CSV export, on the deliveries already stored.

Meant for a table of production size (`generate_deliveries --count 1000000`): it reads, never writes, so it
can run against a copy of a real database too. Every request goes through the full Django stack (middleware,
login, templates) in this process, as a logged-in viewer.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import Client

from dashboard.accounts.roles import VIEWERS, assign_role
from dashboard.deliveries.models import Delivery

PAGES = (
    ("overview", "/"),
    ("streams", "/streams/"),
    ("timeline 24 h", "/timeline/?range=24h"),
    ("timeline 30 d", "/timeline/?range=30d"),
    ("deliveries", "/deliveries/"),
    ("deliveries, failed", "/deliveries/?status=failed"),
    ("error groups 7 d", "/errors/"),
    ("retries 7 d", "/retries/"),
)
STAMP = "%Y-%m-%dT%H:%M:%S"


class Command(BaseCommand):
    help = (
        "Time the main pages (median of --rounds) and measure the CSV export's peak Python memory for slices "
        "of growing size: streamed export keeps the peak flat however many rows go out."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rounds", type=int, default=5)
        parser.add_argument(
            "--export-rows", type=int, nargs="+", default=[1_000, 10_000, 100_000],
            help="Sizes of the exported slices (the newest N deliveries, as near as a date range gets).",
        )

    def handle(self, *args: Any, rounds: int, export_rows: list[int], **options: Any) -> None:
        total = Delivery.objects.count()
        if total == 0:
            raise CommandError("No deliveries stored: run generate_deliveries or a poll first.")
        hosts = [h for h in settings.ALLOWED_HOSTS if h not in ("*", "")] or ["localhost"]
        client = Client(HTTP_HOST=hosts[0].lstrip("."))
        client.force_login(_viewer())
        self.stdout.write(f"{total:,} deliveries stored; medians of {rounds} requests")
        for name, url in PAGES:
            timings = []
            for _ in range(rounds):
                started = time.perf_counter()
                response = client.get(url)
                timings.append(time.perf_counter() - started)
                if response.status_code != 200:
                    raise CommandError(f"{url} answered {response.status_code}")
            self.stdout.write(f"  {name:<22} {statistics.median(timings) * 1000:8.1f} ms")

        self.stdout.write("CSV export (streamed from a server-side cursor):")
        results = []
        for wanted in sorted(set(export_rows)):
            start = _date_of_newest(min(wanted, total))
            url = f"/deliveries/export.csv?range=custom&start={start:{STAMP}}&end={_later():{STAMP}}"
            tracemalloc.start()
            started = time.perf_counter()
            response = client.get(url)
            rows = -1  # the header line
            size = 0
            for chunk in response.streaming_content:  # type: ignore[attr-defined]
                rows += chunk.count(b"\n")
                size += len(chunk)
            elapsed = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            results.append((rows, peak))
            self.stdout.write(
                f"  {rows:>9,} rows  {size / 1e6:8.1f} MB  {rows / elapsed:9,.0f} rows/s  "
                f"peak Python memory {peak / 1e6:6.1f} MB"
            )
        for (small_rows, small_peak), (big_rows, big_peak) in zip(results, results[1:], strict=False):
            if small_rows > 0 and small_peak > 0:
                self.stdout.write(
                    f"  {small_rows:,} -> {big_rows:,} rows: {big_rows / small_rows:.1f}x the rows, "
                    f"{big_peak / small_peak:.2f}x the peak memory"
                )

def _viewer() -> User:
    user, _ = User.objects.get_or_create(username="bench-pages-viewer")
    assign_role(user, VIEWERS)
    return user


def _date_of_newest(n: int) -> datetime:
    date = Delivery.objects.order_by("-date").values_list("date", flat=True)[n - 1]
    return date.astimezone(UTC).replace(microsecond=0)


def _later() -> datetime:
    newest = Delivery.objects.order_by("-date").values_list("date", flat=True).first()
    assert newest is not None
    return (newest + timedelta(minutes=1)).astimezone(UTC).replace(microsecond=0)
