"""Stored delivery history and what is derived from it at ingest time.

The upstream keeps at most seven days of history and edits records in place while it retries;
these tables keep the full history, keyed by the upstream record id, with the derived columns
(status, error group, search keys) that let pages avoid reading payloads.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self, TypeVar, cast

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.lookups import Overlap
from django.db import connections, models, transaction
from django.db.models import Case, Count, Exists, ExpressionWrapper, F, OuterRef, Q, Sum, Value, When
from django.db.models.functions import MD5, Coalesce
from django.urls import reverse
from django.utils import timezone

from dashboard import visibility
from dashboard.deliveries.latency import PERCENTILES
from dashboard.deliveries.links import deliveries_list_url
from dashboard.deliveries.querysets import DateBin, HistogramSum, KeyHashes, LatencyPercentiles, SliceFilters
from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES, retry_schedule
from dashboard.deliveries.status import DeliveryStatus
from dashboard.sources.models import Source
from dashboard.upstream.streams import Stream as ProviderStream
from dashboard.upstream.streams import StreamCounts as ProviderCounts
from dashboard.visibility import ScopedManager, Visibility

# The period of the coarser rollups (PeriodRollup), aligned to midnight UTC; chart steps that are multiples of it
# (6 h, 12 h, 1 d, 7 d from a Monday) can be read from them.
ROLLUP_PERIOD = timedelta(hours=6)
PERIOD_ORIGIN = datetime(2000, 1, 3, tzinfo=UTC)

# Query logic lives in these QuerySets, so views and the admin read as
# `Delivery.objects.failures().for_stream(id)`. Two tables answer the pages: raw deliveries (one row per history
# record, for lists, short ranges and drill-downs) and hourly rollups (counts per hour and dimension, for anything
# a day long or longer).


class DeliveryQuerySet(SliceFilters, models.QuerySet["Delivery"]):
    def chain_events(self) -> DeliveryQuerySet:
        """Deliveries of chain data: everything but the provider's test webhooks."""
        return self.filter(is_test=False)

    def failures(self) -> DeliveryQuerySet:
        return self.exclude(status=DeliveryStatus.DELIVERED)

    def latency_percentiles(
        self, *fields: str, bucket: tuple[datetime, timedelta] | None = None
    ) -> list[dict[str, Any]]:
        """The exact p50, p95 and p99 (`p`, seconds) and the number (`n`) of the rows' latencies, unconfirmed and
        confirmed apart (`confirmed`), per group of `fields` and, with `bucket` (origin, step), per time bucket of
        the rows' dates (`bucket`). Reads every row's latency: for small slices (the latency panels read it below
        `latency.EXACT_UP_TO` deliveries, the rollups' histograms above)."""
        qs: Any = self.chain_events().exclude(latency_ms=None)
        if bucket is not None:
            qs = qs.annotate(bucket=DateBin(bucket[1], F("date"), bucket[0]))
            fields = (*fields, "bucket")
        seconds = ExpressionWrapper(F("latency_ms") / 1000.0, output_field=models.FloatField())
        rows = qs.values(*fields, "confirmed").annotate(n=Count("id"), p=LatencyPercentiles(seconds, PERCENTILES))
        return list(rows.order_by(*fields, "confirmed"))

    def failed_attempt_since(self, since: datetime) -> DeliveryQuerySet:
        """Failing deliveries whose latest attempt was at or after `since`: the first attempt, or the retry
        its count places on the published schedule. A stream failing for a day keeps failing its retries
        long after its deliveries were first sent; this sees those failures too, not only new deliveries."""
        latest_attempt = Case(
            When(retries__lte=0, then=F("date")),
            *(
                When(retries=k, then=F("date") + timedelta(seconds=ATTEMPT_OFFSETS[k]))
                for k in range(1, MAX_RETRIES)
            ),
            default=F("date") + timedelta(seconds=ATTEMPT_OFFSETS[-1]),
            output_field=models.DateTimeField(),
        )
        # No delivery older than the whole schedule has an attempt this recent; the date bound keeps the
        # read on the partial index of failing rows.
        return (
            self.failures()
            .filter(date__gte=since - timedelta(seconds=ATTEMPT_OFFSETS[-1]))
            .alias(latest_attempt=latest_attempt)
            .filter(latest_attempt__gte=since)
        )

    def failure_impact(self, since: datetime, until: datetime | None = None) -> dict[str, Any]:
        """What failed from `since` (to `until`): deliveries still failing that had an attempt in the period
        (`retrying`: still on the provider's schedule; `given_up`: retries used up), those that failed and
        were delivered later (`recovered`, dated in the period), and the first and last of them by date.
        Two aggregates: the failing ones on the partial index of failing rows, the recovered ones by date."""
        failing = self.failed_attempt_since(since)
        recovered = self.filter(status=DeliveryStatus.DELIVERED, retries__gt=0, date__gte=since)
        if until is not None:
            failing, recovered = failing.filter(date__lt=until), recovered.filter(date__lt=until)
        now_failing = failing.aggregate(
            retrying=Count("pk", filter=Q(status=DeliveryStatus.RETRYING)),
            given_up=Count("pk", filter=Q(status=DeliveryStatus.FAILED)),
            first=models.Min("date"),
            last=models.Max("date"),
        )
        healed = recovered.aggregate(recovered=Count("pk"), first=models.Min("date"), last=models.Max("date"))
        firsts = [d for d in (now_failing["first"], healed["first"]) if d is not None]
        lasts = [d for d in (now_failing["last"], healed["last"]) if d is not None]
        return {
            "retrying": now_failing["retrying"],
            "given_up": now_failing["given_up"],
            "recovered": healed["recovered"],
            "first_failure": min(firsts) if firsts else None,
            "last_failure": max(lasts) if lasts else None,
        }

    def failing_run_start(self, since: datetime) -> datetime | None:
        """When the current run of failures began: the date of the oldest failing delivery newer than the
        newest delivered one, looking back to `since`; None when the newest delivery was delivered. Two reads
        of the (stream, date) index, which carries the status."""
        recent = self.filter(date__gte=since)
        last_ok = recent.filter(status=DeliveryStatus.DELIVERED).order_by("-date").values_list("date", flat=True).first()
        failing = recent.failures()
        if last_ok is not None:
            failing = failing.filter(date__gt=last_ok)
        return failing.order_by("date").values_list("date", flat=True).first()

    def still_retrying(self) -> DeliveryQuerySet:
        # Spelled as "not delivered" so the partial index on failed rows serves it.
        return self.exclude(status=DeliveryStatus.DELIVERED).filter(status=DeliveryStatus.RETRYING)

    def for_stream(self, stream_id: str) -> DeliveryQuerySet:
        return self.filter(stream_id=stream_id)

    def newest_first(self) -> DeliveryQuerySet:
        return self.order_by("-date", "-id")

    def oldest_first(self) -> DeliveryQuerySet:
        return self.order_by("date", "id")

    def between(self, start: datetime | None, end: datetime | None) -> DeliveryQuerySet:
        qs = self
        if start is not None:
            qs = qs.filter(date__gte=start)
        if end is not None:
            qs = qs.filter(date__lt=end)
        return qs

    def with_any_key(self, keys: Iterable[str]) -> DeliveryQuerySet:
        """Deliveries holding any of the search keys, as a plain overlap filter: of the keys' hashes (what the
        GIN index holds), then of the keys themselves (a hash shared by another key matches no row). Searches go
        through `search.key_matches`, which uses this for frequent keys only: for a rare key Postgres would
        walk the date index and filter every row."""
        keys = list(keys)
        return self.filter(Overlap(KeyHashes(F("search_keys")), KeyHashes(keys)), search_keys__overlap=keys)

    def pair_of(self, delivery: Delivery) -> DeliveryQuerySet:
        """The other deliveries of the delivery's block to its stream (confirmed for an unconfirmed one and
        the other way round), newest first; read through the block_number index."""
        if delivery.block_number is None or delivery.confirmed is None:
            return self.none()
        return self.filter(
            block_number=delivery.block_number, stream_id=delivery.stream_id, chain_id=delivery.chain_id,
            confirmed=not delivery.confirmed,
        ).order_by("-date", "-id")

    def for_list(self) -> DeliveryQuerySet:
        """The columns a list row shows; payloads stay on disk."""
        return self.only(
            "id", "date", "stream_id", "tag", "webhook_url", "chain_id", "confirmed", "block_number",
            "records", "retries", "error_message", "status", "error_group_id", "is_test",
        )

    def page_after(self, date: datetime, pk: uuid.UUID, *, newest_first: bool = True) -> DeliveryQuerySet:
        """Keyset pagination: rows strictly past (date, id) in the list's order; no OFFSET."""
        if newest_first:
            return self.filter(date__lte=date).filter(Q(date__lt=date) | Q(id__lt=pk))
        return self.filter(date__gte=date).filter(Q(date__gt=date) | Q(id__gt=pk))

    def counts(self) -> dict[str, int]:
        return self.aggregate(
            total=Count("id"),
            failed=Count("id", filter=~Q(status=DeliveryStatus.DELIVERED)),
        )

    def bucketed(self, start: datetime, step: timedelta) -> list[dict[str, Any]]:
        """Delivered and failed counts per fixed-width bucket starting at `start`."""
        rows = (
            self.annotate(bucket=DateBin(step, F("date"), start))
            .values("bucket")
            .annotate(
                delivered=Count("id", filter=Q(status=DeliveryStatus.DELIVERED)),
                failed=Count("id", filter=~Q(status=DeliveryStatus.DELIVERED)),
            )
            .order_by("bucket")
        )
        return cast("list[dict[str, Any]]", list(rows))

    def last_delivery_dates(self, stream_ids: Iterable[str]) -> dict[str, datetime]:
        """Newest delivery date per stream, one index probe per stream (a GROUP BY would read every row)."""
        ids = sorted(set(stream_ids))
        if not ids:
            return {}
        table = self.model._meta.db_table
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                f"""
                SELECT s.stream_id, last.date
                  FROM unnest(%s::text[]) AS s(stream_id)
                  CROSS JOIN LATERAL (
                    SELECT d.date FROM {table} d WHERE d.stream_id = s.stream_id ORDER BY d.date DESC LIMIT 1
                  ) AS last
                """,  # noqa: S608 - the table name comes from the model, values are parameters
                [ids],
            )
            return dict(cursor.fetchall())


_Counts = TypeVar(
    "_Counts", "HourlyRollup", "PeriodRollup", "EventRollup", "EventPeriodRollup", "StreamPeriodRollup"
)
_Rollup = TypeVar("_Rollup", "HourlyRollup", "PeriodRollup", "EventRollup", "EventPeriodRollup")


class SliceCountsQuerySet(SliceFilters, models.QuerySet[_Counts]):
    """What every rollup table answers, the stream period rollup included: delivery counts per time slot and
    stream, tag, webhook URL, chain and status (`hour` is the first hour of a row's slot)."""

    # The retries of a row's deliveries, summed (`RollupQuerySet`: a row's retry count times its deliveries).
    retried: Any = F("retries_sum")

    def between(self, start: datetime | None, end: datetime | None) -> Self:
        qs = self
        if start is not None:
            qs = qs.filter(hour__gte=start)
        if end is not None:
            qs = qs.filter(hour__lt=end)
        return qs

    def bucketed(self, start: datetime, step: timedelta) -> list[dict[str, Any]]:
        rows = (
            self.annotate(bucket=DateBin(step, F("hour"), start))
            .values("bucket")
            .annotate(
                delivered=Coalesce(Sum("deliveries", filter=Q(status=DeliveryStatus.DELIVERED)), 0),
                failed=Coalesce(Sum("deliveries", filter=~Q(status=DeliveryStatus.DELIVERED)), 0),
            )
            .order_by("bucket")
        )
        return cast("list[dict[str, Any]]", list(rows))

    def counts(self) -> dict[str, int]:
        return self.aggregate(
            total=Coalesce(Sum("deliveries"), 0),
            failed=Coalesce(Sum("deliveries", filter=~Q(status=DeliveryStatus.DELIVERED)), 0),
        )

    def by_dimensions(self, *fields: str, split_at: datetime | None = None) -> list[dict[str, Any]]:
        """Totals, failures and retries grouped by the given fields; with `split_at`, also the same sums
        for the hours from `split_at` on (suffix `_recent`), so one query serves two windows."""
        aggregates: dict[str, Any] = {
            "total": Coalesce(Sum("deliveries"), 0),
            "failed": Coalesce(Sum("deliveries", filter=~Q(status=DeliveryStatus.DELIVERED)), 0),
            "retried": Coalesce(Sum(self.retried), 0),
            "last_hour": models.Max("hour"),
        }
        if split_at is not None:
            recent = Q(hour__gte=split_at)
            aggregates["total_recent"] = Coalesce(Sum("deliveries", filter=recent), 0)
            failed_recent = recent & ~Q(status=DeliveryStatus.DELIVERED)
            aggregates["failed_recent"] = Coalesce(Sum("deliveries", filter=failed_recent), 0)
            aggregates["retried_recent"] = Coalesce(Sum(self.retried, filter=recent), 0)
        return list(self.values(*fields).annotate(**aggregates).order_by(*fields))

    def latency_sums(
        self, *fields: str, bucket: tuple[datetime, timedelta] | None = None, confirmed: bool = True
    ) -> list[dict[str, Any]]:
        """The latency histograms summed bucket by bucket, grouped by the given fields, or by time bucket (`bucket`:
        origin and step) — one row per group, its histograms as lists of counts: `unconfirmed` and `confirmed`
        (without `confirmed`, the unconfirmed alone, half the work). Only the tables with histograms (hourly,
        period, stream period rollups) answer."""
        names = ("unconfirmed", "confirmed")[: 2 if confirmed else 1]
        # One array of sums per histogram: one expression to compile and one column to read, where a sum per bucket
        # cost Django ~5 ms to compile (two dozen array lookups) and as much again to turn into row dicts.
        sums = {name: HistogramSum(F(f"latency_{name}")) for name in names}
        qs: Any = self
        if bucket is not None:
            # The bucket's start in Unix seconds: the driver reads an integer at once, where it parses a timestamp's
            # text with a regular expression (~30 µs a row, as long as the query for a month's 600 groups).
            start = DateBin(bucket[1], F("hour"), bucket[0])
            qs = qs.annotate(bucket=models.Func(
                start, template="EXTRACT(EPOCH FROM %(expressions)s)::bigint", output_field=models.BigIntegerField()
            ))
            fields = (*fields, "bucket")
        if not fields:
            return [qs.aggregate(**sums)]
        grouped = qs.values(*fields).annotate(**sums).order_by(*fields)
        # Read on the cursor: Django's row conversion is not needed for integers and lists of them.
        sql, params = grouped.query.sql_with_params()
        with connections[grouped.db].cursor() as cursor:
            cursor.execute(sql, params)
            names_read = [column.name for column in cursor.description]
            rows = [dict(zip(names_read, row, strict=True)) for row in cursor.fetchall()]
        if bucket is not None:
            for row in rows:
                row["bucket"] = datetime.fromtimestamp(row["bucket"], UTC)
        return rows

    def attempt_counts(self) -> dict[str, int]:
        """Deliveries, and attempts inferred from their retry counts: each delivery made 1 + retries attempts,
        all failed but the last of a delivered one."""
        sums = self.aggregate(
            stored=Coalesce(Sum("deliveries"), 0),
            delivered=Coalesce(Sum("deliveries", filter=Q(status=DeliveryStatus.DELIVERED)), 0),
            retried=Coalesce(Sum(self.retried), 0),
        )
        sums["attempts"] = sums.pop("retried") + sums["stored"]
        sums["failed_attempts"] = sums["attempts"] - sums["delivered"]
        return sums

    def change_stamp(self, since: datetime) -> str:
        """A value that changes whenever the rollups from `since` on do: the count of in-place changes
        (`RollupChanges`, moved on by ingest whenever it adds to or takes from rollup rows), the newest rollup
        id (a rebuild deletes and re-inserts rows under new ids), their number from `since` on (a deletion)
        and the table's oid (another database, or one created again, behind the same cache)."""
        table = self.model._meta.db_table
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                f"SELECT %s::regclass::oid, (SELECT max(id) FROM {table}),"  # noqa: S608 - the model's table
                f" (SELECT count(*) FROM {table} WHERE hour >= %s),"
                f" (SELECT max(changes) FROM {RollupChanges._meta.db_table})",
                [table, since],
            )
            row = cursor.fetchone()
        return ":".join(str(value) for value in row)


@dataclass
class FailuresByGroup:
    """`RollupQuerySet.failures_by_group`: rows of (error_group_id, stream_id, tag, webhook_url, n) and of
    (error_group_id, bucket, n)."""

    where: list[dict[str, Any]]
    when: list[dict[str, Any]]


class RollupQuerySet(SliceCountsQuerySet[_Rollup]):
    """What the rollup tables with every dimension answer beside: the counts of every delivery per hour
    (`HourlyRollup`) or per period (`PeriodRollup`), and of the deliveries holding one decoded event
    (`EventRollup`, `EventPeriodRollup`), per error group and retry count too."""

    retried: Any = F("deliveries") * F("retries")

    def attempts_by_url(self) -> list[dict[str, Any]]:
        """Rows of (webhook_url, hour, status, retries, n) in time order: enough to replay every attempt."""
        rows = self.values("webhook_url", "hour", "status", "retries").annotate(n=Sum("deliveries")).order_by("hour")
        return cast("list[dict[str, Any]]", list(rows))

    def objective_counts(self, *fields: str) -> list[dict[str, Any]]:
        """Per group of `fields`: the deliveries (`total`), those not delivered (`failed`) and those not delivered on
        the first attempt (`not_first`: not delivered, or delivered after a retry) — what the delivery objectives
        count (`expectations.objectives`)."""
        failed = ~Q(status=DeliveryStatus.DELIVERED)
        return list(
            self.values(*fields).annotate(
                total=Coalesce(Sum("deliveries"), 0),
                failed=Coalesce(Sum("deliveries", filter=failed), 0),
                not_first=Coalesce(Sum("deliveries", filter=failed | Q(retries__gt=0)), 0),
            ).order_by(*fields)
        )

    def retry_distribution(self, *dimensions: str) -> list[dict[str, Any]]:
        """Deliveries per (dimensions, status, retries), the basis of the retry statistics."""
        return list(
            self.values(*dimensions, "status", "retries")
            .annotate(n=Sum("deliveries"))
            .order_by(*dimensions, "retries")
        )

    def failures_by_group(self, start: datetime, step: timedelta) -> FailuresByGroup:
        """The deliveries of every error group (all failing) counted two ways in one pass over the rows:
        per (error group, stream, tag, URL) and per (error group, bucket `step` wide from `start`).

        One scan and two hash tables (`GROUPING SETS`) where two GROUP BY queries read the rows twice:
        ~40 ms where the two took ~50 at 44 k six-hour rows (30 days at 2 M). The ORM has no grouping sets,
        so its own query of the rows is wrapped."""
        rows = (
            self.exclude(error_group=None)
            .annotate(bucket=DateBin(step, F("hour"), start))
            .values("error_group_id", "stream_id", "tag", "webhook_url", "bucket", "deliveries")
            .order_by()
        )
        sql, params = rows.query.get_compiler(using=self.db).as_sql()
        result = FailuresByGroup([], [])
        with connections[self.db].cursor() as cursor:
            cursor.execute(
                f"""
                SELECT error_group_id, stream_id, tag, webhook_url, bucket, SUM(deliveries), GROUPING(bucket)
                  FROM ({sql}) AS r
                 GROUP BY GROUPING SETS ((error_group_id, stream_id, tag, webhook_url), (error_group_id, bucket))
                """,  # noqa: S608 - the ORM's compiled query; values are parameters
                params,
            )
            for group_id, stream_id, tag, url, bucket, n, by_where in cursor.fetchall():
                if by_where:
                    result.where.append(
                        {"error_group_id": group_id, "stream_id": stream_id, "tag": tag, "webhook_url": url, "n": n}
                    )
                else:
                    result.when.append({"error_group_id": group_id, "bucket": bucket, "n": n})
        return result


class HourlyRollupQuerySet(RollupQuerySet["HourlyRollup"]):
    pass


class PeriodRollupQuerySet(RollupQuerySet["PeriodRollup"]):
    pass


class StreamPeriodRollupQuerySet(SliceCountsQuerySet["StreamPeriodRollup"]):
    pass


class _EventRollupQuerySet(RollupQuerySet[_Rollup]):
    def for_event(self, event: str) -> Self:
        """Rows of one event name, as the search keys spell it (lower case, no prefix)."""
        return self.filter(event=event)

    def event_names(self, since: datetime) -> list[str]:
        """The event names with rows from `since` on, in order: a skip scan of the (event, hour) index, one
        probe per name, however many rows each name has."""
        connection = connections[self.db]
        table = connection.ops.quote_name(self.model._meta.db_table)
        # Only the viewer's streams' events (every stream outside a request).
        seen, seen_params = visibility.sql_named("stream_id", "seen")
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH RECURSIVE names(event) AS (
                    (SELECT event FROM {table} WHERE hour >= %(since)s AND {seen} ORDER BY event LIMIT 1)
                    UNION ALL
                    SELECT (SELECT r.event FROM {table} r WHERE r.event > n.event AND r.hour >= %(since)s
                             AND {seen} ORDER BY r.event LIMIT 1)
                      FROM names n WHERE n.event IS NOT NULL
                )
                SELECT event FROM names WHERE event IS NOT NULL
                """,  # noqa: S608 - the model's table; values are parameters
                {"since": since, **seen_params},
            )
            return [name for (name,) in cursor.fetchall()]


class EventRollupQuerySet(_EventRollupQuerySet["EventRollup"]):
    pass


class EventPeriodRollupQuerySet(_EventRollupQuerySet["EventPeriodRollup"]):
    pass


def slice_options(rows: Iterable[tuple[str, str, str, datetime]]) -> dict[str, list[Any]]:
    """Known streams (id, newest tag), tags and webhook URLs, for the filter menus."""
    streams: dict[str, tuple[datetime, str]] = {}
    tags: set[str] = set()
    urls: set[str] = set()
    for stream_id, tag, url, last in rows:
        if stream_id not in streams or last > streams[stream_id][0]:
            streams[stream_id] = (last, tag)
        tags.add(tag)
        urls.add(url)
    return {
        "streams": sorted(((sid, tag) for sid, (_, tag) in streams.items()), key=lambda s: (s[1], s[0])),
        "stream_ids": sorted(streams),
        "tags": sorted(t for t in tags if t),
        "urls": sorted(u for u in urls if u),
    }


# What the provider says of a stream (`GET /streams/evm`): `error` and `terminated` mean it sends nothing.
PROVIDER_FAILING = ("error", "terminated")
# A stream the provider processes blocks for, or whose status no sync has read yet.
ACTIVE_OR_UNKNOWN = ("", "active")
# The columns `Stream.set_provider_status` sets.
PROVIDER_STATUS_FIELDS = ["provider_status", "provider_status_message", "provider_status_since", "provider_seen_at"]


class StreamQuerySet(models.QuerySet["Stream"]):
    def in_scope(self, scope: tuple[str, str] | None) -> StreamQuerySet:
        """The streams a scope (deliveries.scopes: column and value, None for all) names. A webhook URL names
        the streams whose URL it is at the provider now, or that any stored delivery went to."""
        if scope is None:
            return self
        column, value = scope
        if column == "webhook_url":
            return self.filter(Q(provider_webhook_url=value) | Q(webhook_urls__contains=[value]))
        return self.filter(**{column: value})

    def failing_at_provider(self) -> StreamQuerySet:
        return self.filter(provider_status__in=PROVIDER_FAILING)

    def active_at_provider(self) -> StreamQuerySet:
        """Streams the provider has active, or whose status no sync has read yet."""
        return self.filter(provider_status__in=ACTIVE_OR_UNKNOWN)

    def statuses_not_active(self, stream_ids: Iterable[str]) -> dict[str, str]:
        """The provider's status of each of these streams it does not have active (paused, error, terminated),
        in one query: the provider no longer retries their deliveries (`schedule.retries_stopped`)."""
        ids = sorted(set(stream_ids))
        if not ids:
            return {}
        rows = self.filter(stream_id__in=ids).exclude(provider_status__in=ACTIVE_OR_UNKNOWN)
        return dict(rows.values_list("stream_id", "provider_status"))

    def failing_at_provider_first(self) -> StreamQuerySet:
        return self.alias(
            fine_at_provider=Case(When(provider_status__in=PROVIDER_FAILING, then=Value(0)), default=Value(1))
        ).order_by("fine_at_provider", "stream_id")

    def slice_options(self, since: datetime) -> dict[str, list[Any]]:
        """The filter menus: streams with a delivery since `since` (id, tag of the newest delivery), their tags
        and webhook URLs; read from the stream rows (one per stream), not from the history."""
        rows = self.filter(last_delivery_at__gte=since).values_list(
            "stream_id", "tag", "webhook_urls", "last_delivery_at"
        )
        return slice_options(
            (stream_id, tag, url, last) for stream_id, tag, urls, last in rows for url in (urls or [""])
        )

    def record_provider_streams(
        self, source: Source, streams: Iterable[ProviderStream], now: datetime
    ) -> list[tuple[str, str, str]]:
        """Store what the provider lists for each stream (a row is made for a stream with no delivery yet).

        Returns (stream id, old status, new status) for every stream whose provider status changed."""
        changed: list[tuple[str, str, str]] = []
        for item in streams:
            found = self.filter(source=source, stream_id=item.id).first()
            status = item.status or ""
            row = found if found is not None else Stream(source=source, stream_id=item.id, tag=item.tag or "")
            old, old_seen = (row.provider_status, row.provider_seen_at) if found is not None else ("", None)
            # The provider's own start of an error (`isErrorSince`), so a stream already failing when first
            # seen is not dated by our first look.
            provider_since = item.error_since if status in PROVIDER_FAILING else None
            status_changed = row.set_provider_status(status, item.status_message or "", now, provider_since=provider_since)
            if status_changed:
                changed.append((item.id, old, status))
            row.provider_kind = item.kind
            row.description = (item.description or "")[:1000]
            row.provider_webhook_url = (item.webhook_url or "")[:2048]
            row.provider_chain_ids = list(item.chain_ids)
            if not row.tag and item.tag:
                row.tag = item.tag[:255]
            row.save()
            if status_changed:
                record_status_change(row, old, old_seen)
        return changed

    def record_provider_status(self, status: str, message: str, now: datetime) -> None:
        """Store on these stream rows the status and message the provider gave at `now` (the answer to a status
        change, the stream read again)."""
        with transaction.atomic():
            for row in self.select_for_update():
                old, old_seen = row.provider_status, row.provider_seen_at
                changed = row.set_provider_status(status, message, now)
                row.save(update_fields=PROVIDER_STATUS_FIELDS)
                if changed:
                    record_status_change(row, old, old_seen)

    def record_provider_counts(
        self, source: Source, per_stream: dict[str, ProviderCounts], now: datetime
    ) -> int:
        """Store the provider's delivered / failed counts per stream (`GET /stats`); the number stored."""
        stored = 0
        for stream_id, counts in per_stream.items():
            stored += self.filter(source=source, stream_id=stream_id).update(
                stats_delivered=counts.delivered, stats_failed=counts.failed, stats_at=now
            )
        return stored


class Stream(models.Model):
    """One upstream stream: what its deliveries showed (tag, URLs, chains, dates) and what the provider
    says of it (status, message, description, counts), synced on the poll schedule."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="streams")
    stream_id = models.CharField(max_length=64)
    # Tag of the newest delivery seen (or the provider's, before any delivery).
    tag = models.CharField(max_length=255, blank=True)
    webhook_urls = ArrayField(models.CharField(max_length=2048), default=list, blank=True)
    chain_ids = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    # Empty for a stream the provider lists that has delivered nothing we stored.
    first_delivery_at = models.DateTimeField(null=True, blank=True)
    last_delivery_at = models.DateTimeField(null=True, blank=True)

    # The provider's view, from the last stream sync ("" until a sync listed the stream). Database defaults,
    # because the ingest write path inserts stream rows in SQL without these columns.
    provider_kind = models.CharField(max_length=8, blank=True, db_default="")
    provider_status = models.CharField(max_length=32, blank=True, db_default="")
    provider_status_message = models.TextField(blank=True, db_default="")
    provider_status_since = models.DateTimeField(null=True, blank=True)
    provider_seen_at = models.DateTimeField(null=True, blank=True)
    description = models.TextField(blank=True, db_default="")
    provider_webhook_url = models.CharField(max_length=2048, blank=True, db_default="")
    provider_chain_ids = ArrayField(models.CharField(max_length=32), default=list, db_default=[], blank=True)
    # The provider's counts since the stream was created (`/stats`), whatever its history window.
    stats_delivered = models.BigIntegerField(null=True, blank=True)
    stats_failed = models.BigIntegerField(null=True, blank=True)
    stats_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager.from_queryset(StreamQuerySet)()

    class Meta:
        ordering = ["stream_id"]
        constraints = [models.UniqueConstraint(fields=["source", "stream_id"], name="stream_source_stream")]

    def __str__(self) -> str:
        return self.tag or self.stream_id

    def get_absolute_url(self) -> str:
        return reverse("web:stream", args=[self.stream_id])

    @property
    def failing_at_provider(self) -> bool:
        return self.provider_status in PROVIDER_FAILING

    def set_provider_status(
        self, status: str, message: str, now: datetime, *, provider_since: datetime | None = None
    ) -> bool:
        """Take the provider's status and message as read at `now` (not saved): `provider_status_since` moves only
        when the status changed, to when the provider says it began (`isErrorSince`, where it says and it is
        not in the future) or else to `now`. Whether it changed."""
        changed = status != self.provider_status
        if changed:
            self.provider_status_since = provider_since if provider_since is not None and provider_since <= now else now
        self.provider_status = status
        self.provider_status_message = message[:2000]
        self.provider_seen_at = now
        return changed

    def disagrees_with(self, estimate_state: str | None) -> str:
        """Words for where the provider's status and our estimate (url_health's state) part; "" if they agree
        or one of them is unknown."""
        if not self.provider_status or estimate_state is None:
            return ""
        if self.failing_at_provider and estimate_state != "error":
            return f"The provider reports this stream as {self.provider_status}; our estimate did not expect it."
        if self.provider_status == "active" and estimate_state == "error":
            return "Our estimate puts this stream's URL below the provider's 70 % line, but the provider has it active."
        return ""


def record_status_change(stream: Stream, previous: str, previous_seen_at: datetime | None) -> None:
    """The status `Stream.set_provider_status` just took, as a `StreamStatusChange`, and the stream's outage
    windows derived again (deliveries/completeness.py); its callers call this after saving the row."""
    from dashboard.deliveries.completeness import note_status_change

    note_status_change(stream, previous, previous_seen_at)


def _by_stream_row(visibility: Visibility) -> Q:
    """Rows that belong to a stream row (`stream` foreign key) rather than naming a stream id."""
    return Q(stream__stream_id__in=visibility.sorted_ids())


class StreamStatusChange(models.Model):
    """A provider status of a stream, written when the stream sync (or an action's answer) first saw it: the
    first status seen, then each change. Append-only: the stream's status history, from which its outage
    windows are derived."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="status_changes")
    status = models.CharField(max_length=32)
    # "" for the first status seen.
    previous = models.CharField(max_length=32, blank=True)
    # From when it holds: the provider's `isErrorSince` where it says, else when it was seen (`seen_at`).
    since = models.DateTimeField()
    seen_at = models.DateTimeField()
    # When the previous status was last seen: the change happened between this and `seen_at`.
    previous_seen_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager()
    visible_to = staticmethod(_by_stream_row)

    class Meta:
        ordering = ["since", "id"]
        indexes = [models.Index(fields=["stream", "since"], name="statuschange_stream_since")]

    def __str__(self) -> str:
        return f"{self.stream_id} {self.previous or '—'} → {self.status} at {self.since:%Y-%m-%d %H:%M:%S}"

    @property
    def earliest_start(self) -> datetime:
        """The earliest moment the change can have happened: the provider's own date, else the last sight of
        the previous status (the first status seen: when it was seen)."""
        if self.since < self.seen_at or self.previous_seen_at is None:
            return self.since
        return self.previous_seen_at


class WindowKind(models.TextChoices):
    PROVIDER_STATUS = "status", "Provider status"
    MARKED = "marked", "Marked by a person"
    # A day's completeness audit (actions/audit.py): not an outage, the stretch its sample of blocks came from;
    # a window so that its findings, re-send and verification are the window page's like a scan's.
    AUDIT = "audit", "Completeness audit"


class OutageWindowQuerySet(models.QuerySet["OutageWindow"]):
    def outages(self) -> OutageWindowQuerySet:
        """Windows in which the stream may have missed blocks (a provider status, a marked reload): not audits."""
        return self.exclude(kind=WindowKind.AUDIT)


class OutageWindow(models.Model):
    """A time during which a stream may have missed blocks: a run of provider statuses other than `active`
    (derived from `StreamStatusChange`), or a window a person marked (an address reload). `end` is None while
    the status still holds."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="outage_windows")
    kind = models.CharField(max_length=8, choices=WindowKind.choices)
    # The statuses of the run ("error → terminated"); a marked window's reason.
    label = models.CharField(max_length=200)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    # The status change that opened it (a provider window): one window per run.
    opened_by = models.OneToOneField(
        StreamStatusChange, null=True, blank=True, on_delete=models.CASCADE, related_name="window"
    )
    marked_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ScopedManager.from_queryset(OutageWindowQuerySet)()
    visible_to = staticmethod(_by_stream_row)

    class Meta:
        ordering = ["-start", "-id"]
        indexes = [models.Index(fields=["stream", "-start"], name="outagewindow_stream_start")]
        constraints = [
            # One audit of a stream per day: two planners at once make one.
            models.UniqueConstraint(fields=["stream", "start"], condition=Q(kind="audit"),
                                    name="outagewindow_audit_once"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id} {self.label} from {self.start:%Y-%m-%d %H:%M}"

    def get_absolute_url(self) -> str:
        return reverse("web:outage-window", args=[self.pk])


def _group_visible(visibility: Visibility) -> Q:
    """A group is seen by those who see a stream with a delivery in it (its period rollups, read through the
    (error group, hour) index)."""
    return Q(Exists(PeriodRollup._base_manager.filter(
        error_group_id=OuterRef("pk"), stream_id__in=visibility.sorted_ids()
    )))


class ErrorGroup(models.Model):
    """All error messages that share one template once their variable parts are masked."""

    fingerprint = models.CharField(max_length=64, unique=True)
    template = models.TextField()
    # Dates of the oldest and newest stored delivery whose current error falls in this group.
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    # Stored deliveries whose current error message falls in this group; kept exact at every write.
    delivery_count = models.PositiveIntegerField(default=0)

    objects = ScopedManager()
    visible_to = staticmethod(_group_visible)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return self.template

    def get_absolute_url(self) -> str:
        """The deliveries list filtered to this group's deliveries."""
        return deliveries_list_url(group=self.pk)


class ErrorGroupStream(models.Model):
    """How many stored deliveries of one stream an error group holds, kept exact with the group's own count by every
    writer (`grouping.apply_group_changes`, `recount_error_groups`): a team member's count of a group is the sum
    over their streams' rows, one index probe per group and stream, where summing the six-hour rollups read every
    period of the history (76 k rows at 10 M deliveries)."""

    # Read through the unique constraint's index, which leads with the group.
    error_group = models.ForeignKey(
        ErrorGroup, on_delete=models.CASCADE, related_name="stream_counts", db_index=False
    )
    stream_id = models.CharField(max_length=64)
    delivery_count = models.PositiveIntegerField(default=0)

    objects = ScopedManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["error_group", "stream_id"], name="errorgroupstream_group_stream")
        ]

    def __str__(self) -> str:
        return f"{self.error_group_id} / {self.stream_id}: {self.delivery_count}"


class ErrorMessage(models.Model):
    """One distinct error message that stored deliveries carry: error text is looked for among these (thousands
    of rows) and the deliveries of the messages found are read through `delivery_message_date`, never by
    checking the text of millions of deliveries. Kept by ingest and `rebuild_derived`; retention drops a message
    last seen before the oldest stored delivery."""

    # md5 of the message as Postgres computes it: the deliveries' index is on md5(error_message), so the two match.
    # Unique through a constraint, not `unique=True`, which also builds a second index for LIKE that nothing
    # asks; every batch of failing deliveries writes to this table.
    digest = models.CharField(max_length=32)
    message = models.TextField()
    # A group's messages are read through errormessage_group_seen, which leads with the group.
    error_group = models.ForeignKey(ErrorGroup, on_delete=models.CASCADE, related_name="messages", db_index=False)
    # Date of the newest delivery stored with this message (it only moves forward).
    last_seen = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["error_group", "-last_seen"], name="errormessage_group_seen")]
        constraints = [models.UniqueConstraint(fields=["digest"], name="errormessage_digest")]

    def __str__(self) -> str:
        return self.message


class Delivery(models.Model):
    """One upstream history record: a webhook delivery of one block to one URL."""

    id = models.UUIDField(primary_key=True)
    # No index of its own: no query picks deliveries by source alone (a source is never deleted, a rebuild
    # reads every row), and each index costs every insert.
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    date = models.DateTimeField()
    stream_id = models.CharField(max_length=64)
    tag = models.CharField(max_length=255, blank=True)
    webhook_url = models.CharField(max_length=2048)
    chain_id = models.CharField(max_length=32, blank=True)
    confirmed = models.BooleanField(null=True)
    block_number = models.BigIntegerField(null=True, blank=True)
    records = models.IntegerField(default=0)
    retries = models.IntegerField(default=0)
    error_message = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    # Indexed by delivery_group_date, which leads with it.
    error_group = models.ForeignKey(
        ErrorGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries", db_index=False
    )
    # Lower-cased, kind-prefixed keys ("tx:0x…", "addr:0x…", "topic:0x…", "block:123") extracted from the
    # payload so that searches use a GIN index (of their hashes) and never read payloads.
    search_keys = ArrayField(models.CharField(max_length=80), default=list, blank=True)
    tiny_payload = models.JSONField(default=dict)
    payload = models.JSONField(null=True, blank=True)
    # Digest of the upstream record as received; an unchanged record is never rewritten.
    record_hash = models.CharField(max_length=64)
    first_seen_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The provider's test webhook after a stream is created, updated or reactivated (no chain, no block): shown
    # and labelled, but kept out of rollups, success rates and alert conditions.
    is_test = models.BooleanField(default=False, db_default=False)
    # When the block was mined (`payload.block.timestamp`), and the processing latency: `date` (the first
    # attempt) minus it, in milliseconds (`latency.py`). None without a payload (excludePayload) or a block.
    block_time = models.DateTimeField(null=True, blank=True)
    latency_ms = models.IntegerField(null=True, blank=True)

    objects = ScopedManager.from_queryset(DeliveryQuerySet)()

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["-date", "-id"], name="delivery_date_id"),
            models.Index(fields=["stream_id", "date"], include=["status"], name="delivery_stream_date"),
            models.Index(fields=["tag", "date"], name="delivery_tag_date"),
            models.Index(fields=["webhook_url", "date"], name="delivery_url_date"),
            models.Index(fields=["error_group", "date"], name="delivery_group_date"),
            # A delivery by its exact message (an ErrorMessage's digest), newest first. Not partial: Postgres keeps
            # statistics of an index expression only for a whole-table index, and without them it reads every row
            # of a message to sort them instead of walking this index for a page. The message and status ride
            # along (INCLUDE) so that counting a message's failing rows is an index-only scan: Postgres computes
            # md5() from the included column instead of fetching each row (10,001 rows: 4 ms instead of 22).
            models.Index(
                MD5("error_message"), F("date"), F("id"), include=["error_message", "status"],
                name="delivery_message_date",
            ),
            # The failing rows by date. The status and the stream ride along (INCLUDE) so that counting a status
            # of them (`status=failed`), or a stream's failing rows in a window, is an index-only scan: such a
            # count filtered every failing row it met by fetching it (60 k rows, 0.6 s at 2 M).
            models.Index(
                fields=["date"], include=["status", "stream_id"], condition=~Q(status=DeliveryStatus.DELIVERED),
                name="delivery_failed_date",
            ),
            models.Index(fields=["block_number"], name="delivery_block"),
            # The provider's test webhooks: few, counted apart from the chain events.
            models.Index(fields=["date"], condition=Q(is_test=True), name="delivery_test_date"),
            # The search keys' hashes (8 bytes a key; the keys' text took 2.4 times the bytes): see KeyHashes.
            GinIndex(KeyHashes(F("search_keys")), name="delivery_search_hashes"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id} {self.date:%Y-%m-%d %H:%M:%S} {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("web:delivery", args=[self.pk])

    @property
    def is_failure(self) -> bool:
        return self.status != DeliveryStatus.DELIVERED

    @property
    def next_retry(self) -> datetime | None:
        """The provider's next attempt on its published schedule; None unless the delivery is retrying."""
        if self.status != DeliveryStatus.RETRYING:
            return None
        return retry_schedule(self.date, self.retries).next_retry


class DeliveryChange(models.Model):
    """What a poll saw of a delivery when it first saw it failing, and each time its retries, error text or
    status changed afterwards: the attempt history as observed, with when it was seen.

    Written by the ingest write path in the transaction that writes the delivery (see ingest.store_parsed);
    a delivery first seen delivered has none. No foreign key: retention deletes deliveries in bulk and these
    by the same date."""

    delivery_id = models.UUIDField()
    # The delivery's date (its first attempt), so retention cuts both tables on the same column.
    date = models.DateTimeField()
    seen_at = models.DateTimeField()
    retries = models.IntegerField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    error_message = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["delivery_id", "seen_at"], name="change_delivery_seen"),
            models.Index(fields=["date"], name="change_date"),
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id} seen {self.status} after {self.retries} retries at {self.seen_at:%Y-%m-%d %H:%M:%S}"


def rollup_indexes(prefix: str) -> list[models.Index]:
    """The time range alone and by stream, tag and error group: what the pages' slices filter on."""
    return [
        models.Index(fields=["hour"], name=f"{prefix}_hour"),
        models.Index(fields=["stream_id", "hour"], name=f"{prefix}_stream_hour"),
        models.Index(fields=["tag", "hour"], name=f"{prefix}_tag_hour"),
        models.Index(fields=["error_group", "hour"], name=f"{prefix}_group_hour"),
    ]


class SliceCounts(models.Model):
    """Delivery counts per time slot and the dimensions a page slices by; `hour` is the slot's first hour."""

    # The foreign keys have no index of their own, as every index costs each write of a rollup row: no query
    # picks rollups by source alone (a source is never deleted), a group's slots are read through the
    # (error group, hour) index of the hourly and period tables, and the event tables are read by event.
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+", db_index=False)
    hour = models.DateTimeField()
    stream_id = models.CharField(max_length=64)
    tag = models.CharField(max_length=255, blank=True)
    webhook_url = models.CharField(max_length=2048)
    chain_id = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    deliveries = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.stream_id} {self.hour:%Y-%m-%d %H:00} {self.status} ×{self.deliveries}"


class RollupCounts(SliceCounts):
    """Delivery counts per time slot and every dimension, error group and retry count included."""

    error_group = models.ForeignKey(
        ErrorGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    retries = models.IntegerField()

    class Meta:
        abstract = True


class LatencyCounts(models.Model):
    """The deliveries of a rollup row counted per latency bucket (`latency.BOUNDS`), unconfirmed and confirmed
    apart: one integer per bucket, added bucket by bucket when rows are merged, so any window's percentiles come
    from the sums of its rows. Null in a row written before latencies were kept (counts nothing)."""

    latency_unconfirmed = ArrayField(models.IntegerField(), null=True, blank=True)
    latency_confirmed = ArrayField(models.IntegerField(), null=True, blank=True)

    class Meta:
        abstract = True


class HourlyRollup(LatencyCounts, RollupCounts):
    """Delivery counts per hour and dimension, kept exact by ingest (each written row added under its
    dimensions, each replaced row taken away under its own) and recomputed from the rows by a rebuild.

    Kept for ROLLUP_RETENTION_DAYS, longer than the deliveries themselves.
    """

    objects = ScopedManager.from_queryset(HourlyRollupQuerySet)()

    class Meta:
        indexes = rollup_indexes("rollup")

    @staticmethod
    def hour_of(moment: datetime) -> datetime:
        """The start of the rollup hour holding `moment`."""
        return moment.replace(minute=0, second=0, microsecond=0)


class RollupChanges(models.Model):
    """One row (id 1, made by the first such write) counting the writes that changed rollup rows in place
    (ingest adds to and takes from them in the statement that writes them): with the rollups' newest id and
    number, what tells a cached result computed from the rollups that they changed
    (`RollupQuerySet.change_stamp`)."""

    changes = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "rollup changes"

    def __str__(self) -> str:
        return f"{self.changes} rollup changes"


class PeriodRollup(LatencyCounts, RollupCounts):
    """The hourly rollups summed per ROLLUP_PERIOD (six hours from midnight UTC): what a long window reads for
    its whole periods, a sixth of the rows or fewer. Ingest adds and takes away the same counts here as in the
    hourly rows (`rollup_upkeep.add_to_rollups`); a rebuild or a search-key refresh recomputes it from the
    hourly rows (`rollup_upkeep.refresh_periods`), so it is exactly their sum."""

    objects = ScopedManager.from_queryset(PeriodRollupQuerySet)()

    class Meta:
        indexes = rollup_indexes("period_rollup")

    @staticmethod
    def period_of(moment: datetime) -> datetime:
        """The start of the ROLLUP_PERIOD holding `moment`."""
        return PERIOD_ORIGIN + (moment - PERIOD_ORIGIN) // ROLLUP_PERIOD * ROLLUP_PERIOD


class StreamPeriodRollup(LatencyCounts, SliceCounts):
    """The period rollups summed over error group and retry count: per ROLLUP_PERIOD, stream, tag, webhook URL,
    chain and status, the deliveries and their retries. What a long window read per stream (the streams page,
    charts not sliced by error group, a stream's whole history) sums: at 10 M deliveries, 8.5 k rows for 90 days
    where the period rollups hold 156 k.
    Ingest adds the same counts here as there (`rollup_upkeep.add_to_rollups`); a rebuild or a search-key
    refresh recomputes it from the period rows (`rollup_upkeep.refresh_periods`)."""

    # The deliveries' retries, summed.
    retries_sum = models.PositiveBigIntegerField()

    objects = ScopedManager.from_queryset(StreamPeriodRollupQuerySet)()

    class Meta:
        indexes = [
            models.Index(fields=["hour"], name="stream_period_hour"),
            models.Index(fields=["stream_id", "hour"], name="stream_period_stream_hour"),
        ]


class EventCounts(RollupCounts):
    """Rollup counts of the deliveries holding one decoded event."""

    # The event's name lower-cased, as its search key spells it ("transfer" for `event:transfer`).
    event = models.CharField(max_length=80)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.event} {self.stream_id} {self.hour:%Y-%m-%d %H:00} {self.status} ×{self.deliveries}"


def event_rollup_indexes(prefix: str) -> list[models.Index]:
    """One event's slots, a stream's, and the time range alone."""
    return [
        models.Index(fields=["event", "hour"], name=f"{prefix}_event_hour"),
        models.Index(fields=["stream_id", "hour"], name=f"{prefix}_stream_hour"),
        models.Index(fields=["hour"], name=f"{prefix}_hour"),
    ]


class EventRollup(EventCounts):
    """The hourly rollup once more, per decoded event name: `deliveries` counts the deliveries of the hour and
    dimensions whose payload holds that event (their `event:<name>` search key). A delivery with two events
    counts under each; one with none is in no row. Written by the same statements as `HourlyRollup`
    (`rollup_upkeep.py`), so both tables always describe the same rows; kept as long."""

    objects = ScopedManager.from_queryset(EventRollupQuerySet)()

    class Meta:
        indexes = event_rollup_indexes("eventrollup")


class EventPeriodRollup(EventCounts):
    """The event rollup summed per ROLLUP_PERIOD, as `PeriodRollup` is the hourly one: what a long window
    sliced by an event reads for its whole periods. Recomputed with the period rollups, from the event rows of
    every period an ingest touches, so it is exactly their sum."""

    objects = ScopedManager.from_queryset(EventPeriodRollupQuerySet)()

    class Meta:
        indexes = event_rollup_indexes("eventperiod")
