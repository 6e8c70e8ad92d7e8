"""Response times of every page, every filter of the deliveries list, every search kind and the CSV export's
first byte, on the deliveries already stored; EXPLAIN of the queries they issue.

Meant for a table of production size (`generate_deliveries --count 2000000 --days 90`, which writes the
hourly rollups, stream rows and error-group counts too): it reads, never writes (but for its two logins),
so it can run against a copy of a real database too. Every request goes through the full Django stack
(middleware, login, templates) in this process, as a logged-in viewer (the admin as staff). Each URL is
requested once untimed (a warm-up: the first request of a process compiles templates, and the streams page
finds the provider-rule estimate that the poll computes in production), then `--rounds` times.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.accounts.models import Team, TeamMembership
from dashboard.accounts.roles import TEAM_MEMBERS, VIEWERS, assign_role
from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup, Stream
from dashboard.deliveries.teams import visibility_for
from dashboard.heap import freeze_loaded_objects
from dashboard.visibility import viewing

STAMP = "%Y-%m-%dT%H:%M:%S"
PAGE_TARGET_MS = 100.0
SEARCH_TARGET_MS = 50.0
# Tables whose queries are EXPLAINed: the ones that grow with the history.
HOT_TABLES = (
    "deliveries_delivery", "deliveries_hourlyrollup", "deliveries_periodrollup", "deliveries_eventrollup",
    "deliveries_eventperiodrollup", "deliveries_streamperiodrollup", "deliveries_errorgroup", "deliveries_stream",
)


@dataclass(frozen=True)
class Target:
    group: str
    name: str
    url: str
    params: dict[str, str]
    staff: bool = False
    target_ms: float = PAGE_TARGET_MS


@dataclass
class Timing:
    target: Target
    p50: float
    p95: float


class Command(BaseCommand):
    help = (
        "p50 / p95 of every page, every deliveries-list filter, every search kind (search box, list, admin) and "
        "the CSV export's first byte; EXPLAIN ANALYZE of the queries each issues, flagging plans that remove many "
        "rows by filter; the export's peak memory for slices of growing size."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rounds", type=int, default=20, help="Timed requests per URL (default 20).")
        parser.add_argument("--only", choices=("pages", "searches"), help="Only the pages, or only the searches.")
        parser.add_argument(
            "--explain", action="store_true",
            help="Also print the key lines of the slowest query's plan for every URL (flags are always printed).",
        )
        parser.add_argument(
            "--flag-removed", type=int, default=5000, metavar="ROWS",
            help="Flag a plan that removes more than this many rows by filter (default 5000).",
        )
        parser.add_argument(
            "--team-streams", type=int, default=0, metavar="K",
            help="Read the pages as a Team member whose team owns the K busiest streams (every read narrowed to "
            "them, as for any team member); 0 (default): as a Viewer, who sees every stream.",
        )
        parser.add_argument(
            "--export-rows", type=int, nargs="*", default=[10_000, 100_000],
            help="Sizes of the exported slices whose peak memory is measured (none skips).",
        )

    def handle(
        self, *args: Any, rounds: int, only: str | None, explain: bool, flag_removed: int, export_rows: list[int],
        team_streams: int, **options: Any,
    ) -> None:
        if not Delivery.objects.exists():
            raise CommandError("No deliveries stored: run generate_deliveries or a poll first.")
        if rounds < 1:
            raise CommandError("--rounds must be at least 1")
        if team_streams < 0:
            raise CommandError("--team-streams must be 0 or more")
        self.team_streams = team_streams
        # The API's per-caller rate limit (read on every call) would answer the timed rounds 429: lifted for the run.
        limit = settings.API_RATE_PER_MINUTE
        settings.API_RATE_PER_MINUTE = 1_000_000
        try:
            self._bench(rounds=rounds, only=only, explain=explain, flag_removed=flag_removed, export_rows=export_rows)
        finally:
            settings.API_RATE_PER_MINUTE = limit

    def _bench(self, *, rounds: int, only: str | None, explain: bool, flag_removed: int, export_rows: list[int]) -> None:
        hosts = [h for h in settings.ALLOWED_HOSTS if h not in ("*", "")] or ["localhost"]
        self.viewer = Client(HTTP_HOST=hosts[0].lstrip("."))
        viewer = _viewer(self.team_streams)
        self.viewer.force_login(viewer)
        # The pages' values (a stream, a delivery, an error group…) are taken from what the viewer sees.
        self.seen = visibility_for(viewer)
        if self.team_streams:
            owned = Team.objects.get(name=BENCH_TEAM).stream_ids
            self.stdout.write(
                f"Pages read as a Team member of {BENCH_TEAM}, owning {len(owned)} of "
                f"{Stream.objects.count()} streams: {', '.join(owned)}"
            )
        self.staff = Client(HTTP_HOST=hosts[0].lstrip("."))
        self.staff.force_login(_staff())
        freeze_loaded_objects()  # as wsgi.py does in the web process
        self.rounds, self.explain, self.flag_removed = rounds, explain, flag_removed
        self.flags: list[str] = []

        total = Delivery.objects.count()
        newest = Delivery.objects.order_by("-date").values_list("date", flat=True).first()
        assert newest is not None
        day = Delivery.objects.filter(date__gt=newest - timedelta(days=1)).count()
        self.stdout.write(
            f"{total:,} deliveries stored, {day:,} in the newest 24 h, {HourlyRollup.objects.count():,} rollup rows; "
            f"p50 / p95 of {rounds} requests after one warm-up, ms"
        )
        timings: list[Timing] = []
        if only != "searches":
            with viewing(self.seen):
                targets = _page_targets()
            timings += self._run(targets)
            timings.append(self._export_first_byte())
        if only != "pages":
            with viewing(self.seen):
                searches = _search_targets()
            timings += self._run(searches)
        if only != "searches" and export_rows:
            self._export_memory(export_rows, total)

        missed = [t for t in timings if t.p95 > t.target.target_ms]
        self.stdout.write("")
        if missed:
            self.stdout.write(f"{len(missed)} of {len(timings)} over their p95 target:")
            for t in missed:
                self.stdout.write(f"  {t.target.group} / {t.target.name}: p95 {t.p95:.1f} ms > {t.target.target_ms:.0f} ms")
        else:
            self.stdout.write(f"All {len(timings)} under their p95 targets (pages {PAGE_TARGET_MS:.0f} ms, "
                              f"searches {SEARCH_TARGET_MS:.0f} ms).")
        if self.flags:
            self.stdout.write(f"{len(self.flags)} plans remove more than {flag_removed:,} rows by filter:")
            for flag in self.flags:
                self.stdout.write("  " + flag)
        else:
            self.stdout.write(f"No plan removes more than {flag_removed:,} rows by filter.")

    def _run(self, targets: list[Target]) -> list[Timing]:
        results = []
        group = ""
        for target in targets:
            if target.group != group:
                group = target.group
                self.stdout.write(f"{group}:")
            client = self.staff if target.staff else self.viewer
            self._get(client, target)
            timings = []
            for _ in range(self.rounds):
                started = time.perf_counter()
                self._get(client, target)
                timings.append((time.perf_counter() - started) * 1000)
            p50, p95 = _percentiles(timings)
            mark = "  !" if p95 > target.target_ms else ""
            self.stdout.write(f"  {target.name:<40} {p50:8.1f} / {p95:7.1f}{mark}")
            results.append(Timing(target, p50, p95))
            self._explain(client, target)
        return results

    def _get(self, client: Client, target: Target) -> None:
        response = client.get(target.url, target.params)
        if response.status_code not in (200, 302):
            raise CommandError(f"{target.url} {target.params} answered {response.status_code}")

    def _explain(self, client: Client, target: Target) -> None:
        """EXPLAIN ANALYZE every query of the hot tables one request issues; flag filters that drop many rows."""
        with CaptureQueriesContext(connection) as captured:
            self._get(client, target)
        slowest: tuple[float, list[str]] | None = None
        for query in captured.captured_queries:
            sql = query["sql"]
            if not any(table in sql for table in HOT_TABLES) or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
                (plan,) = cursor.fetchone()
            plan = plan if isinstance(plan, list) else json.loads(plan)
            removed = _removed_by_filter(plan[0]["Plan"])
            if removed > self.flag_removed:
                alone = _removed_in_index_alone(plan[0]["Plan"])
                note = f", {alone:,} of them in index-only scans (no row fetched)" if alone else ""
                self.flags.append(f"{target.group} / {target.name}: {removed:,} rows removed by filter in "
                                  f"{plan[0]['Execution Time']:.1f} ms{note}: {_short(sql)}")
            if self.explain and (slowest is None or plan[0]["Execution Time"] > slowest[0]):
                with connection.cursor() as cursor:
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                    slowest = (plan[0]["Execution Time"], [line for (line,) in cursor.fetchall()])
        if slowest is not None:
            wanted = re.compile(r"Scan|Rows Removed|Execution Time|Limit|Sort  |Nested Loop|Hash|Aggregate")
            self.stdout.write(f"    slowest query's plan ({slowest[0]:.1f} ms):")
            for line in slowest[1]:
                if wanted.search(line):
                    self.stdout.write("      " + re.sub(r"'\{?[^']{60,}'", "'…'", line.rstrip())[:150])

    def _export_first_byte(self) -> Timing:
        """Time to the export's first chunk (headers and the first rows) for the whole table."""
        target = Target("CSV export", "first byte, all deliveries", "/deliveries/export.csv", {})
        timings = []
        for n in range(self.rounds + 1):
            started = time.perf_counter()
            response = self.viewer.get(target.url)
            next(iter(response.streaming_content))  # type: ignore[attr-defined]
            elapsed = (time.perf_counter() - started) * 1000
            response.close()
            if n:
                timings.append(elapsed)
        p50, p95 = _percentiles(timings)
        self.stdout.write(f"{target.group}:\n  {target.name:<40} {p50:8.1f} / {p95:7.1f}")
        return Timing(target, p50, p95)

    def _export_memory(self, sizes: list[int], total: int) -> None:
        self.stdout.write("CSV export, whole slices (streamed from a server-side cursor):")
        results = []
        for wanted in sorted(set(sizes)):
            start = _date_of_newest(min(wanted, total))
            url = f"/deliveries/export.csv?range=custom&start={start:{STAMP}}&end={_later():{STAMP}}"
            tracemalloc.start()
            started = time.perf_counter()
            response = self.viewer.get(url)
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


def _percentiles(timings: list[float]) -> tuple[float, float]:
    ordered = sorted(timings)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _removed_by_filter(node: dict[str, Any]) -> int:
    """Rows the plan's nodes read and threw away by a filter (per loop times loops), summed over the tree; a
    scan of a system catalog (`pg_…`: the search's read of the column statistics) does not count, its size
    follows the schema, not the data."""
    loops = int(node.get("Actual Loops", 1) or 1)
    removed = sum(int(node.get(key, 0) or 0) for key in ("Rows Removed by Filter", "Rows Removed by Index Recheck",
                                                          "Rows Removed by Join Filter")) * loops
    if str(node.get("Relation Name", "")).startswith("pg_"):
        removed = 0
    return removed + sum(_removed_by_filter(child) for child in node.get("Plans", []))


def _removed_in_index_alone(node: dict[str, Any]) -> int:
    """Of `_removed_by_filter`, the rows index-only scans threw away without fetching a single row from the table:
    a filter on a column the index carries, which costs index entries, not row reads."""
    removed = 0
    if node.get("Node Type") == "Index Only Scan" and not node.get("Heap Fetches"):
        removed = _removed_by_filter({key: value for key, value in node.items() if key != "Plans"})
    return removed + sum(_removed_in_index_alone(child) for child in node.get("Plans", []))


def _short(sql: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"'\{?[^']{60,}'", "'…'", sql))[:220]


def _page_targets() -> list[Target]:
    """Every page, and the deliveries list under each of its filters, with values taken from the data."""
    busiest = (
        HourlyRollup.objects.values("stream_id", "tag", "webhook_url", "chain_id")
        .annotate(n=Count("id")).order_by("-n").first()
    )
    assert busiest is not None
    newest = Delivery.objects.newest_first().values("id", "date").first()
    oldest = Delivery.objects.oldest_first().values("id", "date").first()
    assert newest is not None and oldest is not None
    group = ErrorGroup.objects.order_by("-delivery_count").first()
    failing = Delivery.objects.failures().newest_first().values_list("error_message", flat=True).first()
    tx = next((k for k in (Delivery.objects.values_list("search_keys", flat=True).first() or []) if k.startswith("tx:")), None)
    stream, tag, url, chain = busiest["stream_id"], busiest["tag"], busiest["webhook_url"], busiest["chain_id"]
    # The list's page link after the newest row (the form of `web.forms.encode_cursor`).
    micros = int(newest["date"].timestamp()) * 1_000_000 + newest["date"].microsecond
    cursor = f"{micros}_{newest['id'].hex}"

    pages = [
        ("overview", "/", {}),
        ("overview, 30 d chart", "/", {"range": "30d"}),
        ("streams", "/streams/", {}),
        ("stream page", f"/streams/{stream}/", {}),
        # The stream page's latency panel over its window: percentiles and p95 over time from the histograms.
        ("stream page, latency 24 h", f"/streams/{stream}/", {"range": "24h"}),
        ("stream page, latency 30 d", f"/streams/{stream}/", {"range": "30d"}),
        ("timeline 1 h", "/timeline/", {"range": "1h"}),
        ("timeline 24 h", "/timeline/", {"range": "24h"}),
        ("timeline 7 d", "/timeline/", {"range": "7d"}),
        ("timeline 30 d", "/timeline/", {"range": "30d"}),
        ("timeline 24 h, one stream", "/timeline/", {"range": "24h", "stream": stream}),
        ("timeline 7 d, one URL", "/timeline/", {"range": "7d", "url": url}),
        ("timeline 1 h, one event", "/timeline/", {"range": "1h", "event": "Transfer"}),
        ("timeline 30 d, one event", "/timeline/", {"range": "30d", "event": "Transfer"}),
        # Every timeline carries its latency panel (p50/p95/p99 over time, per chain unsliced); these slice it by
        # chain, tag and URL over the longest window.
        ("timeline 30 d, latency, one chain", "/timeline/", {"range": "30d", "chain": chain or "0x1"}),
        ("timeline 30 d, latency, one tag", "/timeline/", {"range": "30d", "tag": tag}),
        ("timeline 30 d, latency, one URL", "/timeline/", {"range": "30d", "url": url}),
        ("error groups 7 d", "/errors/", {}),
        ("error groups 30 d", "/errors/", {"range": "30d"}),
        ("error groups 30 d, one event", "/errors/", {"range": "30d", "event": "Transfer"}),
        ("retries 7 d by stream", "/retries/", {}),
        ("retries 30 d by tag", "/retries/", {"range": "30d", "by": "tag"}),
        ("delivery, newest", f"/deliveries/{newest['id']}/", {}),
        ("delivery, oldest", f"/deliveries/{oldest['id']}/", {}),
        ("delivery payload.json", f"/deliveries/{newest['id']}/payload.json", {}),
        ("actions", "/actions/", {}),
    ]
    targets = [Target("Pages", name, path, params, staff=path == "/actions/") for name, path, params in pages]
    filters: list[tuple[str, dict[str, str]]] = [
        ("no filter", {}),
        ("stream", {"stream": stream}),
        ("tag", {"tag": tag}),
        ("url", {"url": url}),
        ("status=delivered", {"status": "delivered"}),
        ("status=failing", {"status": "failing"}),
        ("status=retrying", {"status": "retrying"}),
        ("status=failed", {"status": "failed"}),
        ("chain", {"chain": chain or "0x1"}),
        ("confirmed=false", {"confirmed": "false"}),
        ("retries>=3", {"retries": "3"}),
        ("range=24h", {"range": "24h"}),
        ("range=30d, oldest first", {"range": "30d", "order": "oldest"}),
        ("order=oldest", {"order": "oldest"}),
        ("next page (after=)", {"after": cursor}),
        ("stream + status=failing + 7 d", {"stream": stream, "status": "failing", "range": "7d"}),
        # The stream page's "slowest deliveries" link: unconfirmed deliveries at or above the window's p95.
        ("slowest: stream + confirmed=false + min_latency + 7 d",
         {"stream": stream, "confirmed": "false", "min_latency": "5", "range": "7d"}),
    ]
    if group is not None:
        filters.append(("group", {"group": str(group.pk)}))
    if failing:
        filters.append(("error text", {"error": " ".join(failing.split()[:3])}))
    if tx:
        filters.append(("q (tx hash)", {"q": tx.split(":", 1)[1]}))
    targets += [Target("Deliveries list", name, "/deliveries/", params) for name, params in filters]
    # The API answers the same questions through the same functions (session-authenticated here, as a viewer):
    # its lists are held to the pages' targets, its search to the searches'.
    api = [
        ("deliveries", "/api/v1/deliveries", {}, PAGE_TARGET_MS),
        ("deliveries, status=failing", "/api/v1/deliveries", {"status": "failing"}, PAGE_TARGET_MS),
        ("deliveries, stream + failing + 7 d", "/api/v1/deliveries",
         {"stream": stream, "status": "failing", "range": "7d"}, PAGE_TARGET_MS),
        ("delivery, newest", f"/api/v1/deliveries/{newest['id']}", {}, PAGE_TARGET_MS),
        ("streams", "/api/v1/streams", {}, PAGE_TARGET_MS),
        ("error groups 30 d", "/api/v1/error-groups", {"range": "30d"}, PAGE_TARGET_MS),
        ("timeline 30 d", "/api/v1/timeline", {"range": "30d"}, PAGE_TARGET_MS),
        ("latency 30 d, one stream", "/api/v1/latency", {"range": "30d", "stream": stream}, PAGE_TARGET_MS),
        ("incidents", "/api/v1/incidents", {}, PAGE_TARGET_MS),
    ]
    if tx:
        api.append(("deliveries, q (tx hash)", "/api/v1/deliveries", {"q": tx.split(":", 1)[1]}, SEARCH_TARGET_MS))
    targets += [Target("API", name, path, params, target_ms=target) for name, path, params, target in api]
    return targets


def _search_targets() -> list[Target]:
    """Every search kind through the three places that search: the search box, the deliveries list's `q=` and
    the admin's search. Terms come from the oldest delivery, the worst case for a newest-first walk."""
    oldest = Delivery.objects.order_by("date", "id").values("id", "stream_id", "block_number", "search_keys").first()
    assert oldest is not None

    def held_by(key: str) -> int:
        return Delivery.objects.with_any_key([key])[:5001].count()

    keys = oldest["search_keys"]
    by_count = {kind: sorted((held_by(k), k) for k in keys if k.startswith(kind + ":")) for kind in ("tx", "addr")}
    topics = [k for k in keys if k.startswith("topic:")]
    busiest_topic = max(topics, key=held_by) if topics else None
    failed = Delivery.objects.exclude(status="delivered").order_by("date").values_list("error_message", flat=True).first()
    terms: list[tuple[str, str, dict[str, str] | None]] = []
    if by_count["tx"]:
        value = by_count["tx"][0][1].split(":", 1)[1]
        terms.append(("tx hash", value, {"q": value}))
    if by_count["addr"]:
        value = by_count["addr"][0][1].split(":", 1)[1]
        terms.append(("address", value, {"q": value}))
        value = by_count["addr"][-1][1].split(":", 1)[1]
        terms.append(("busy address", value, {"q": value}))
    if busiest_topic:
        value = busiest_topic.split(":", 1)[1]
        terms.append(("common topic", value, {"q": value}))
    terms.append(("block", str(oldest["block_number"]), {"q": str(oldest["block_number"])}))
    terms.append(("stream id", oldest["stream_id"], {"stream": oldest["stream_id"]}))
    terms.append(("delivery id", str(oldest["id"]), None))
    if failed:
        text = " ".join(failed.split()[:3])
        terms.append(("error text", text, {"status": "failing", "error": text}))
    targets = []
    for kind, text, list_query in terms:
        targets.append(Target("Searches", f"{kind}: search box", "/search/", {"q": text}, target_ms=SEARCH_TARGET_MS))
        if list_query is not None:
            targets.append(Target("Searches", f"{kind}: deliveries list", "/deliveries/", list_query,
                                  target_ms=SEARCH_TARGET_MS))
        targets.append(Target("Searches", f"{kind}: admin", "/admin/deliveries/delivery/", {"q": text}, staff=True,
                              target_ms=SEARCH_TARGET_MS))
    return targets


def _staff() -> User:
    user, _ = User.objects.get_or_create(username="bench-pages-admin", defaults={"is_staff": True, "is_superuser": True})
    return user


BENCH_TEAM = "bench-pages-team"


def _viewer(team_streams: int = 0) -> User:
    """A Viewer (every stream); with `team_streams`, a Team member whose team owns that many of the busiest
    streams (by hourly rollup rows), so that every page's reads are narrowed as for any team member."""
    user, _ = User.objects.get_or_create(username="bench-pages-viewer")
    TeamMembership.objects.filter(user=user).delete()
    if not team_streams:
        assign_role(user, VIEWERS)
        return user
    busiest = list(
        HourlyRollup.objects.values_list("stream_id", flat=True).annotate(n=Count("id")).order_by("-n")[:team_streams]
    )
    team, _ = Team.objects.update_or_create(name=BENCH_TEAM, defaults={"stream_ids": busiest, "tag_patterns": []})
    TeamMembership.objects.create(team=team, user=user)
    assign_role(user, TEAM_MEMBERS)
    return user


def _date_of_newest(n: int) -> datetime:
    date = Delivery.objects.order_by("-date").values_list("date", flat=True)[n - 1]
    return date.astimezone(UTC).replace(microsecond=0)


def _later() -> datetime:
    newest = Delivery.objects.order_by("-date").values_list("date", flat=True).first()
    assert newest is not None
    return (newest + timedelta(minutes=1)).astimezone(UTC).replace(microsecond=0)
