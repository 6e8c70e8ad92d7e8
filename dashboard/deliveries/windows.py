"""Delivered and failed counts over exact trailing windows ("the last 24 hours" up to this second), at a
cost that does not grow with the daily rate: the whole hours inside a window come from the hourly rollups,
and only the partial hour at each end (at most an hour of rows each) from raw deliveries. The sum is what
counting the raw rows of the whole window gives, because ingest keeps the rollups exact."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.deliveries.status import DeliveryStatus

HOUR = timedelta(hours=1)


def _ceil_hour(moment: datetime) -> datetime:
    floor = HourlyRollup.hour_of(moment)
    return floor if floor == moment else floor + HOUR


def trailing_counts(now: datetime, hours: Iterable[int]) -> dict[str, int]:
    """`total_H` and `failed_H` (not delivered) of the deliveries dated in [now - H hours, now], per H."""
    current_hour = HourlyRollup.hour_of(now)
    failing = ~Q(status=DeliveryStatus.DELIVERED)
    rollup_sums: dict[str, Any] = {}
    raw_counts: dict[str, Any] = {}
    raw_parts: list[Q] = []
    first_whole_hours: list[datetime] = []
    for h in sorted(set(hours)):
        since = now - timedelta(hours=h)
        first_whole = _ceil_hour(since)
        if first_whole < current_hour:
            whole = Q(hour__gte=first_whole, hour__lt=current_hour)
            rollup_sums[f"total_{h}"] = Coalesce(Sum("deliveries", filter=whole), 0)
            rollup_sums[f"failed_{h}"] = Coalesce(Sum("deliveries", filter=whole & failing), 0)
            first_whole_hours.append(first_whole)
            raw = Q(date__gte=since, date__lt=first_whole) | Q(date__gte=current_hour, date__lte=now)
        else:
            raw = Q(date__gte=since, date__lte=now)
        raw_counts[f"total_{h}"] = Count("id", filter=raw)
        raw_counts[f"failed_{h}"] = Count("id", filter=raw & failing)
        raw_parts.append(raw)
    if not raw_parts:
        return {}
    where = raw_parts[0]
    for part in raw_parts[1:]:
        where |= part
    result: dict[str, int] = Delivery.objects.filter(where).aggregate(**raw_counts)
    if rollup_sums:
        whole_hours = HourlyRollup.objects.between(min(first_whole_hours), current_hour)
        for key, value in whole_hours.aggregate(**rollup_sums).items():
            result[key] += value
    return result
