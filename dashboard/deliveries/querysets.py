"""Query logic for deliveries, so views and the admin read as `Delivery.objects.failures().for_stream(id)`.

Two tables answer the pages: raw deliveries (one row per history record, for lists, short ranges and
drill-downs) and hourly rollups (counts per hour and dimension, for anything a day long or longer).
Both share the slice filters (stream, tag, URL, chain, status, error group), so a chart drawn from one
and a list read from the other always agree on what a slice is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.db import connection, models
from django.db.models import Case, Count, F, Q, Sum, Value, When
from django.db.models.functions import Coalesce

from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES
from dashboard.deliveries.search import SearchTerm

if TYPE_CHECKING:
    from dashboard.deliveries.models import Delivery, HourlyRollup  # noqa: F401

FAILING_STATUSES = ("retrying", "failed")


class DateBin(models.Func):
    """Postgres `date_bin(stride, source, origin)`: the start of the fixed-width bucket holding `source`."""

    function = "date_bin"
    output_field = models.DateTimeField()

    def __init__(self, stride: timedelta, expression: Any, origin: datetime) -> None:
        super().__init__(
            Value(stride, output_field=models.DurationField()),
            expression,
            Value(origin, output_field=models.DateTimeField()),
        )


class _SliceMixin:
    """Filters both tables understand; `None` or "" means "any"."""

    def slice(
        self,
        *,
        stream_id: str | None = None,
        tag: str | None = None,
        webhook_url: str | None = None,
        chain_id: str | None = None,
        status: str | None = None,
        error_group_id: int | None = None,
    ) -> Any:
        qs: Any = self
        if stream_id:
            qs = qs.filter(stream_id=stream_id)
        # An empty tag is a real value upstream, so only None skips the filter.
        if tag is not None:
            qs = qs.filter(tag=tag)
        if webhook_url:
            qs = qs.filter(webhook_url=webhook_url)
        if chain_id:
            qs = qs.filter(chain_id=chain_id)
        if status == "failing":
            qs = qs.filter(status__in=FAILING_STATUSES)
        elif status:
            qs = qs.filter(status=status)
        if error_group_id:
            qs = qs.filter(error_group_id=error_group_id)
        return qs


class DeliveryQuerySet(_SliceMixin, models.QuerySet["Delivery"]):
    def failures(self) -> DeliveryQuerySet:
        return self.exclude(status="delivered")

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

    def still_retrying(self) -> DeliveryQuerySet:
        # Spelled as "not delivered" so the partial index on failed rows serves it.
        return self.exclude(status="delivered").filter(status="retrying")

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

    def matching(self, term: SearchTerm) -> DeliveryQuerySet:
        """Deliveries holding any of the term's keys; served by the GIN index on search_keys."""
        return self.filter(search_keys__overlap=list(term.keys))

    def error_text(self, text: str) -> DeliveryQuerySet:
        """Failures whose current error message contains the text (case-insensitive)."""
        return self.exclude(status="delivered").filter(error_message__icontains=text)

    def for_list(self) -> DeliveryQuerySet:
        """The columns a list row shows; payloads stay on disk."""
        return self.only(
            "id", "date", "stream_id", "tag", "webhook_url", "chain_id", "confirmed", "block_number",
            "records", "retries", "error_message", "status", "error_group_id",
        )

    def page_after(self, date: datetime, pk: uuid.UUID, *, newest_first: bool = True) -> DeliveryQuerySet:
        """Keyset pagination: rows strictly past (date, id) in the list's order; no OFFSET."""
        if newest_first:
            return self.filter(date__lte=date).filter(Q(date__lt=date) | Q(id__lt=pk))
        return self.filter(date__gte=date).filter(Q(date__gt=date) | Q(id__gt=pk))

    def counts(self) -> dict[str, int]:
        return self.aggregate(
            total=Count("id"),
            failed=Count("id", filter=~Q(status="delivered")),
        )

    def window_counts(self, now: datetime, hours: Iterable[int]) -> dict[str, int]:
        """Totals and failures for several trailing windows in one pass, e.g. total_1, failed_1, total_24."""
        hours = sorted(hours)
        aggregates: dict[str, Any] = {}
        for h in hours:
            since = now - timedelta(hours=h)
            aggregates[f"total_{h}"] = Count("id", filter=Q(date__gte=since))
            aggregates[f"failed_{h}"] = Count("id", filter=Q(date__gte=since) & ~Q(status="delivered"))
        return self.filter(date__gte=now - timedelta(hours=hours[-1]), date__lte=now).aggregate(**aggregates)

    def bucketed(self, start: datetime, step: timedelta) -> list[dict[str, Any]]:
        """Delivered and failed counts per fixed-width bucket starting at `start`."""
        rows = (
            self.annotate(bucket=DateBin(step, F("date"), start))
            .values("bucket")
            .annotate(
                delivered=Count("id", filter=Q(status="delivered")),
                failed=Count("id", filter=~Q(status="delivered")),
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
        with connection.cursor() as cursor:
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


class HourlyRollupQuerySet(_SliceMixin, models.QuerySet["HourlyRollup"]):
    def between(self, start: datetime | None, end: datetime | None) -> HourlyRollupQuerySet:
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
                delivered=Coalesce(Sum("deliveries", filter=Q(status="delivered")), 0),
                failed=Coalesce(Sum("deliveries", filter=~Q(status="delivered")), 0),
            )
            .order_by("bucket")
        )
        return cast("list[dict[str, Any]]", list(rows))

    def counts(self) -> dict[str, int]:
        return self.aggregate(
            total=Coalesce(Sum("deliveries"), 0),
            failed=Coalesce(Sum("deliveries", filter=~Q(status="delivered")), 0),
        )

    def by_dimensions(self, *fields: str, split_at: datetime | None = None) -> list[dict[str, Any]]:
        """Totals, failures and retries grouped by the given fields; with `split_at`, also the same sums
        for the hours from `split_at` on (suffix `_recent`), so one query serves two windows."""
        aggregates: dict[str, Any] = {
            "total": Coalesce(Sum("deliveries"), 0),
            "failed": Coalesce(Sum("deliveries", filter=~Q(status="delivered")), 0),
            "retried": Coalesce(Sum(F("deliveries") * F("retries")), 0),
            "last_hour": models.Max("hour"),
        }
        if split_at is not None:
            recent = Q(hour__gte=split_at)
            aggregates["total_recent"] = Coalesce(Sum("deliveries", filter=recent), 0)
            failed_recent = recent & ~Q(status="delivered")
            aggregates["failed_recent"] = Coalesce(Sum("deliveries", filter=failed_recent), 0)
            aggregates["retried_recent"] = Coalesce(Sum(F("deliveries") * F("retries"), filter=recent), 0)
        return list(self.values(*fields).annotate(**aggregates).order_by(*fields))

    def attempts_by_url(self) -> list[dict[str, Any]]:
        """Rows of (webhook_url, hour, status, retries, n) in time order: enough to replay every attempt."""
        return list(
            self.values("webhook_url", "hour", "status", "retries")
            .annotate(n=Sum("deliveries"))
            .order_by("hour")
        )

    def retry_distribution(self, *dimensions: str) -> list[dict[str, Any]]:
        """Deliveries per (dimensions, status, retries), the basis of the retry statistics."""
        return list(
            self.values(*dimensions, "status", "retries")
            .annotate(n=Sum("deliveries"))
            .order_by(*dimensions, "retries")
        )

    def slice_options(self) -> dict[str, list[Any]]:
        """Known streams (id, newest tag), tags and webhook URLs, for the filter menus."""
        streams: dict[str, tuple[datetime, str]] = {}
        tags: set[str] = set()
        urls: set[str] = set()
        rows = self.values_list("stream_id", "tag", "webhook_url").annotate(last=models.Max("hour"))
        for stream_id, tag, url, last in rows:
            if stream_id not in streams or last > streams[stream_id][0]:
                streams[stream_id] = (last, tag)
            tags.add(tag)
            urls.add(url)
        return {
            "streams": sorted(((sid, tag) for sid, (_, tag) in streams.items()), key=lambda s: (s[1], s[0])),
            "stream_ids": sorted(streams),
            "tags": sorted(t for t in tags if t),
            "urls": sorted(urls),
        }

    def by_group_and_bucket(self, start: datetime, step: timedelta) -> list[dict[str, Any]]:
        rows = (
            self.exclude(error_group=None)
            .annotate(bucket=DateBin(step, F("hour"), start))
            .values("error_group_id", "bucket")
            .annotate(n=Sum("deliveries"))
            .order_by("error_group_id", "bucket")
        )
        return cast("list[dict[str, Any]]", list(rows))
