"""Checks shared by the ingestion and polling tests: stored rows against the upstream's truth, and derived
data against what the stored rows say when recomputed from scratch."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from django.db import connection, connections
from psycopg.conninfo import make_conninfo


def truth(sim: Any) -> dict[uuid.UUID, dict[str, Any]]:
    return {uuid.UUID(r["id"]): r for r in sim.world.history_records(include_payload=True)}


def assert_matches_upstream(sim: Any, using: str = "default") -> None:
    """Every record the upstream shows now is stored exactly once, as the upstream shows it (in the database
    `using`, e.g. a private server a fault test started)."""
    from dashboard.deliveries.models import Delivery
    from dashboard.deliveries.status import delivery_status

    records = truth(sim)
    stored = {d.id: d for d in Delivery.objects.using(using).filter(id__in=list(records))}
    assert set(stored) == set(records)
    for record_id, record in records.items():
        row = stored[record_id]
        assert row.error_message == record["errorMessage"], record_id
        assert row.retries == int(record["tinyPayload"]["retries"]), record_id
        assert row.payload == record.get("payload"), record_id
        assert row.tiny_payload == record["tinyPayload"], record_id
        assert row.status == delivery_status(record["errorMessage"], row.retries)
        assert row.stream_id == record["streamId"] and row.tag == record["tag"]


def assert_nothing_extra(sim: Any, using: str = "default") -> None:
    """No row beyond the upstream's records: over the span the upstream still shows, as many rows as records (a
    row older than that is one the upstream has since dropped from its window, kept by our retention)."""
    from dashboard.deliveries.models import Delivery

    records = truth(sim)
    oldest = min(datetime.fromisoformat(r["date"].replace("Z", "+00:00")) for r in records.values())
    assert Delivery.objects.using(using).filter(date__gte=oldest).count() == len(records)


def assert_derived_exact(using: str = "default") -> None:
    """Error groups, rollups and streams equal what a from-scratch computation over the rows gives."""
    from dashboard.deliveries.grouping import error_fingerprint, error_template
    from dashboard.deliveries.models import Delivery, ErrorGroup, ErrorGroupStream, HourlyRollup, Stream

    groups = {g.id: g for g in ErrorGroup.objects.using(using)}
    counts: Counter[int] = Counter()
    per_stream: Counter[tuple[int, str]] = Counter()
    firsts: dict[int, datetime] = {}
    lasts: dict[int, datetime] = {}
    for d in Delivery.objects.using(using).only("id", "date", "stream_id", "error_message", "error_group_id", "status"):
        # Failing exactly when there is an error message, and then in a group: what the deliveries list's
        # filters rely on when they leave out "failing" beside a group or an error text (SliceFilters.slice).
        assert (d.status == "delivered") == (not d.error_message), (d.status, d.error_message)
        if not d.error_message:
            assert d.error_group_id is None
            continue
        group = groups[d.error_group_id]
        assert group.fingerprint == error_fingerprint(error_template(d.error_message))
        counts[group.id] += 1
        per_stream[(group.id, d.stream_id)] += 1
        firsts[group.id] = min(firsts.get(group.id, d.date), d.date)
        lasts[group.id] = max(lasts.get(group.id, d.date), d.date)
    for group in groups.values():
        assert group.delivery_count == counts[group.id], group.template
        if counts[group.id]:
            assert (group.first_seen, group.last_seen) == (firsts[group.id], lasts[group.id]), group.template
    # Each group's count per stream, with no row for a stream that holds none of its deliveries.
    kept = {(c.error_group_id, c.stream_id): c.delivery_count for c in ErrorGroupStream.objects.using(using)}
    assert kept == dict(per_stream)

    # Every stored error message is recorded, in its delivery's group, with its newest date or a later one (a
    # delivery that was seen with it and has another message now).
    from dashboard.deliveries.models import ErrorMessage

    recorded = {m.message: m for m in ErrorMessage.objects.using(using)}
    newest: dict[str, tuple[datetime, int]] = {}
    for d in Delivery.objects.using(using).exclude(error_message="").only("date", "error_message", "error_group_id"):
        seen = newest.get(d.error_message)
        newest[d.error_message] = (max(seen[0], d.date) if seen else d.date, d.error_group_id)  # type: ignore[arg-type]
    for message, (last, group_id) in newest.items():
        assert message in recorded, message
        entry = recorded[message]
        assert entry.digest == hashlib.md5(message.encode()).hexdigest(), message  # noqa: S324 - Postgres' md5()
        assert (entry.error_group_id, entry.last_seen >= last) == (group_id, True), message

    dims = "source_id, stream_id, tag, webhook_url, chain_id, status, error_group_id, retries"
    # The hourly rollups are the counts of their rows; the period rollups (both) the sums of their hours.
    for expected_sql, actual_table in (
        (f"SELECT date_trunc('hour', date), {dims}, count(*) FROM deliveries_delivery GROUP BY 1, {dims}",
         "deliveries_hourlyrollup"),
        (f"SELECT date_bin('6 hours', hour, '2000-01-03T00:00:00+00:00'), {dims}, sum(deliveries)"
         f" FROM deliveries_hourlyrollup GROUP BY 1, {dims}", "deliveries_periodrollup"),
        (f"SELECT date_bin('6 hours', hour, '2000-01-03T00:00:00+00:00'), {dims}, event, sum(deliveries)"
         f" FROM deliveries_eventrollup GROUP BY 1, {dims}, event", "deliveries_eventperiodrollup"),
    ):
        with connections[using].cursor() as cursor:
            cursor.execute(expected_sql)
            expected = {tuple(row[:-1]): row[-1] for row in cursor.fetchall()}
            extra = ", event" if "event" in actual_table else ""
            cursor.execute(
                f"SELECT hour, {dims}{extra}, sum(deliveries) FROM {actual_table} GROUP BY 1, {dims}{extra}"
            )
            actual = {tuple(row[:-1]): row[-1] for row in cursor.fetchall()}
        assert actual == expected, actual_table
    # The stream period rollups are the period rollups summed over error group and retry count, one row each.
    slice_dims = "hour, source_id, stream_id, tag, webhook_url, chain_id, status"
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT {slice_dims}, sum(deliveries), sum(deliveries * retries) FROM deliveries_periodrollup"
            f" GROUP BY {slice_dims}"
        )
        expected_rows = sorted(cursor.fetchall())
        cursor.execute(f"SELECT {slice_dims}, deliveries, retries_sum FROM deliveries_streamperiodrollup")
        assert sorted(cursor.fetchall()) == expected_rows, "deliveries_streamperiodrollup"
    assert HourlyRollup.objects.using(using).filter(deliveries=0).count() == 0
    assert_latency_histograms_exact(using)

    streams = {(s.source_id, s.stream_id): s for s in Stream.objects.using(using)}
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT source_id, stream_id, min(date), max(date), COALESCE(array_agg(DISTINCT webhook_url"
            " ORDER BY webhook_url) FILTER (WHERE webhook_url <> ''), '{}')"
            " FROM deliveries_delivery GROUP BY 1, 2"
        )
        rows = cursor.fetchall()
    assert set(streams) == {(r[0], r[1]) for r in rows}
    for source_id, stream_id, first, last, urls in rows:
        stream = streams[(source_id, stream_id)]
        assert (stream.first_delivery_at, stream.last_delivery_at) == (first, last)
        # A delivery without a webhook URL adds none to its stream.
        assert stream.webhook_urls == urls


def subprocess_database_url() -> str:
    """The test database, for a child process (a manage.py command killed by a test)."""
    db = connection.settings_dict
    user = quote(db.get("USER") or "postgres", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    # A socket directory (the project-local server) goes percent-encoded in the host part.
    host = quote(db.get("HOST") or "127.0.0.1", safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgresql://{user}{password}@{host}{port}/{quote(db['NAME'], safe='')}"


def server_conninfo() -> str:
    """The test database's server, as a psycopg connection string for a second, separate connection."""
    db = connection.settings_dict
    params = {"host": db.get("HOST"), "port": db.get("PORT"), "user": db.get("USER"), "password": db.get("PASSWORD")}
    return make_conninfo(dbname="postgres", **{k: str(v) for k, v in params.items() if v})


_PARTITION_SCAN = re.compile(r"Seq Scan on (deliveries_delivery_\w+) \w+\s+\(cost=[^\n]*")
# A partition holding fewer rows than this may be scanned whole: cheaper than any index, and bounded.
SMALL_PARTITION_ROWS = 2_000


def readable_plan(plan: str) -> str:
    """A plan of the partitioned deliveries table read as the parent's: each partition's index named by the
    parent index it belongs to ("delivery_search_hashes", "deliveries_delivery_pkey"), and the seq scan of a
    partition holding fewer than SMALL_PARTITION_ROWS rows (an empty one, a week only begun) marked as such, so
    "Seq Scan on deliveries_delivery" in a plan means a partition holding many rows was scanned."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, p.relname
              FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
             WHERE p.relkind = 'I'
            """
        )
        names = sorted(cursor.fetchall(), key=lambda pair: -len(pair[0]))
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'deliveries_delivery'::regclass AND c.reltuples < %s",
            [SMALL_PARTITION_ROWS],
        )
        small = {name for (name,) in cursor.fetchall()}
    for child, parent in names:
        plan = re.sub(rf"\b{re.escape(child)}\b", parent, plan)
    return _PARTITION_SCAN.sub(
        lambda m: f"(small partition {m.group(1)} read whole)" if m.group(1) in small else m.group(0), plan
    )


def assert_latency_histograms_exact(using: str = "default") -> None:
    """Each hourly rollup row's latency histograms count its rows' latencies per bucket (unconfirmed and confirmed
    apart); each period row's are the sums of its hours', each stream period row's the sums of its period rows'."""
    from dashboard.deliveries.latency import BUCKETS, added, bucket_of
    from dashboard.deliveries.models import (
        PERIOD_ORIGIN,
        Delivery,
        HourlyRollup,
        PeriodRollup,
        StreamPeriodRollup,
    )

    dims = ("source_id", "stream_id", "tag", "webhook_url", "chain_id", "status", "error_group_id", "retries")
    expected: dict[tuple[Any, ...], list[int]] = {}
    rows = Delivery.objects.using(using).filter(is_test=False).values(*dims, "date", "latency_ms", "confirmed")
    for row in rows:
        key = (HourlyRollup.hour_of(row["date"]), *(row[d] for d in dims))
        histograms = expected.setdefault(key, [0] * (2 * BUCKETS))
        if row["latency_ms"] is not None:
            histograms[bucket_of(row["latency_ms"]) + (BUCKETS if row["confirmed"] else 0)] += 1
    hourly = {
        (r["hour"], *(r[d] for d in dims)): added(r["latency_unconfirmed"]) + added(r["latency_confirmed"])
        for r in HourlyRollup.objects.using(using).values("hour", *dims, "latency_unconfirmed", "latency_confirmed")
    }
    assert hourly == expected, "hourly latency histograms"
    summed: dict[tuple[Any, ...], list[int]] = {}
    for (hour, *rest), histograms in hourly.items():
        key = (PERIOD_ORIGIN + (hour - PERIOD_ORIGIN) // timedelta(hours=6) * timedelta(hours=6), *rest)
        summed[key] = [a + b for a, b in zip(summed.get(key, [0] * (2 * BUCKETS)), histograms, strict=True)]
    periods = {
        (r["hour"], *(r[d] for d in dims)): added(r["latency_unconfirmed"]) + added(r["latency_confirmed"])
        for r in PeriodRollup.objects.using(using).values("hour", *dims, "latency_unconfirmed", "latency_confirmed")
    }
    assert periods == summed, "period latency histograms"
    stream_dims = ("source_id", "stream_id", "tag", "webhook_url", "chain_id", "status")
    per_stream: dict[tuple[Any, ...], list[int]] = {}
    for (hour, *rest), histograms in periods.items():
        key = (hour, *rest[:len(stream_dims)])
        per_stream[key] = [a + b for a, b in zip(per_stream.get(key, [0] * (2 * BUCKETS)), histograms, strict=True)]
    stream_periods = {
        (r["hour"], *(r[d] for d in stream_dims)): added(r["latency_unconfirmed"]) + added(r["latency_confirmed"])
        for r in StreamPeriodRollup.objects.using(using).values(
            "hour", *stream_dims, "latency_unconfirmed", "latency_confirmed"
        )
    }
    assert stream_periods == per_stream, "stream period latency histograms"
