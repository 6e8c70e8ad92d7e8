"""Response times of the main pages and the memory of the CSV export, on the deliveries already stored.

Meant for a table of production size (`generate_deliveries --count 1000000`): it reads, never writes, so it
can run against a copy of a real database too. Every request goes through the full Django stack (middleware,
login, templates) in this process, as a logged-in viewer.
"""

from __future__ import annotations

import re
import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

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
            "--searches", type=int, default=20, metavar="ROUNDS",
            help="Requests per search kind and entry point (search box, deliveries list, admin); 0 skips.",
        )
        parser.add_argument("--only-searches", action="store_true", help="Skip the pages and the export.")
        parser.add_argument(
            "--explain", action="store_true",
            help="EXPLAIN ANALYZE the slowest deliveries query of each search and print its plan's key lines.",
        )
        parser.add_argument(
            "--export-rows", type=int, nargs="+", default=[1_000, 10_000, 100_000],
            help="Sizes of the exported slices (the newest N deliveries, as near as a date range gets).",
        )

    def handle(
        self, *args: Any, rounds: int, export_rows: list[int], searches: int, only_searches: bool, explain: bool,
        **options: Any,
    ) -> None:
        if not Delivery.objects.exists():
            raise CommandError("No deliveries stored: run generate_deliveries or a poll first.")
        hosts = [h for h in settings.ALLOWED_HOSTS if h not in ("*", "")] or ["localhost"]
        client = Client(HTTP_HOST=hosts[0].lstrip("."))
        client.force_login(_viewer())
        if searches > 0 or explain:
            admin_client = Client(HTTP_HOST=hosts[0].lstrip("."))
            admin_client.force_login(_staff())
            self._searches(client, admin_client, max(searches, 1), explain)
        if only_searches:
            return
        total = Delivery.objects.count()
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

    def _searches(self, client: Client, admin_client: Client, rounds: int, explain: bool) -> None:
        """p50 / p95 of every search kind through the three places that search: the search box, the deliveries
        list's `q=` filter and the admin's search. Terms come from the oldest delivery, the worst case for a
        newest-first walk."""
        self.stdout.write(f"Searches (p50 / p95 of {rounds} requests, ms):")
        self.stdout.write(f"  {'kind':<16} {'search box':>17} {'deliveries list':>17} {'admin':>17}")
        for kind, term, list_query in _search_terms():
            row = []
            for entry, c, url, params in (
                ("search box", client, "/search/", {"q": term}),
                ("deliveries list", client, "/deliveries/", list_query),
                ("admin", admin_client, "/admin/deliveries/delivery/", {"q": term}),
            ):
                if params is None:
                    row.append(f"{'-':>17}")
                    continue
                timings = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    response = c.get(url, params)
                    timings.append(time.perf_counter() - started)
                    if response.status_code not in (200, 302):
                        raise CommandError(f"{url} {params} answered {response.status_code}")
                timings.sort()
                p50 = statistics.median(timings) * 1000
                p95 = timings[min(len(timings) - 1, round(0.95 * (len(timings) - 1)))] * 1000
                row.append(f"{p50:8.1f} / {p95:6.1f}")
                if explain and entry != "search box":
                    self._explain(kind, entry, c, url, params)
            self.stdout.write(f"  {kind:<16} " + " ".join(row))

    def _explain(self, kind: str, entry: str, client: Client, url: str, params: dict[str, str]) -> None:
        with CaptureQueriesContext(connection) as captured:
            client.get(url, params)
        queries = [q for q in captured.captured_queries if "deliveries_delivery" in q["sql"]]
        if not queries:
            return
        slowest = max(queries, key=lambda q: float(q["time"]))
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + slowest["sql"])
            lines = [line for (line,) in cursor.fetchall()]
        wanted = re.compile(r"Scan|Rows Removed|Execution Time|Limit|Sort  |Nested Loop|Hash")
        self.stdout.write(f"    EXPLAIN {kind} via {entry} ({float(slowest['time']) * 1000:.1f} ms in the request):")
        for line in lines:
            if wanted.search(line):
                self.stdout.write("      " + re.sub(r"'\{?[^']{60,}'", "'…'", line.rstrip())[:150])


def _search_terms() -> list[tuple[str, str, dict[str, str] | None]]:
    """(kind, search text, the deliveries list's query for it) for each kind of search."""
    oldest = Delivery.objects.order_by("date", "id").values("id", "stream_id", "block_number", "search_keys").first()
    assert oldest is not None

    def held_by(key: str) -> int:
        return Delivery.objects.filter(search_keys__contains=[key])[:5001].count()

    keys = oldest["search_keys"]
    by_count = {kind: sorted((held_by(k), k) for k in keys if k.startswith(kind + ":")) for kind in ("tx", "addr")}
    topics = [k for k in keys if k.startswith("topic:")]
    busiest_topic = max(topics, key=held_by) if topics else None
    failed = Delivery.objects.exclude(status="delivered").order_by("date").values_list("error_message", flat=True).first()
    terms: list[tuple[str, str, dict[str, str] | None]] = []
    if by_count["tx"]:
        terms.append(("tx hash", by_count["tx"][0][1].split(":", 1)[1], None))
    if by_count["addr"]:
        terms.append(("address", by_count["addr"][0][1].split(":", 1)[1], None))
        terms.append(("busy address", by_count["addr"][-1][1].split(":", 1)[1], None))
    if busiest_topic:
        terms.append(("common topic", busiest_topic.split(":", 1)[1], None))
    terms = [(kind, text, {"q": text}) for kind, text, _ in terms]
    terms.append(("block", str(oldest["block_number"]), {"q": str(oldest["block_number"])}))
    terms.append(("stream id", oldest["stream_id"], {"stream": oldest["stream_id"]}))
    terms.append(("delivery id", str(oldest["id"]), None))
    if failed:
        text = " ".join(failed.split()[:3])
        terms.append(("error text", text, {"status": "failing", "error": text}))
    return terms


def _staff() -> User:
    user, _ = User.objects.get_or_create(username="bench-pages-admin", defaults={"is_staff": True, "is_superuser": True})
    return user


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
