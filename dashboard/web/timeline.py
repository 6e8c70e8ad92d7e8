"""Delivered-versus-failed counts over a window for any slice, from the right table for the range."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from dashboard.deliveries.links import SLICE_FILTERS, query_string
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.deliveries.search import key_matches
from dashboard.web.charts import (
    EPOCH,
    ROLLUP_FROM,
    BarChart,
    Bucket,
    bar_chart,
    choose_step,
    fill_buckets,
    floor_to,
)

LINK_FORMAT = "%Y-%m-%dT%H:%M:%S"


@dataclass
class Timeline:
    start: datetime
    end: datetime
    step: timedelta
    from_rollups: bool
    buckets: list[Bucket]
    chart: BarChart
    zone: tzinfo = UTC

    @property
    def zone_name(self) -> str:
        """The zone as the tz database names it ("Europe/Berlin"), for the page to say what its times are in."""
        return str(getattr(self.zone, "key", None) or self.zone.tzname(None) or "UTC")

    @property
    def step_label(self) -> str:
        minutes = int(self.step.total_seconds() // 60)
        if minutes < 60:
            return f"{minutes} min"
        if minutes < 1440:
            return f"{minutes // 60} h"
        return f"{minutes // 1440} d"


def list_link(slice_kwargs: dict[str, Any], event: str = "") -> Callable[[Bucket, str | None], str]:
    """Link from a bucket to the deliveries list of exactly that slice and time (and event, by its search)."""
    base = reverse("web:deliveries")
    fixed = {SLICE_FILTERS[k]: v for k, v in slice_kwargs.items() if v}
    if event:
        fixed["q"] = f"event:{event}"

    def link(bucket: Bucket, status: str | None) -> str:
        params = dict(fixed)
        params.update(
            range="custom", start=bucket.start.strftime(LINK_FORMAT), end=bucket.end.strftime(LINK_FORMAT)
        )
        if status:
            params["status"] = status
        return f"{base}?{query_string(params.items())}"

    return link


def build(start: datetime, end: datetime, slice_kwargs: dict[str, Any], *, event: str = "", width: int = 1000,
          height: int = 200, zone: tzinfo = UTC) -> Timeline:
    """The chart of the slice; with `event`, of only the deliveries holding that decoded event: the event
    rollup for a day or more, else the raw rows of the window through the event's search key."""
    span = end - start
    # Long ranges, and any range reaching back past the deliveries' retention (a zoom into an old week),
    # read the hourly rollups, which are kept longer.
    raw_kept_from = timezone.now() - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    from_rollups = span >= ROLLUP_FROM or start < raw_kept_from
    step = choose_step(span, hourly_only=from_rollups)
    first = floor_to(start, step)
    if from_rollups:
        window = RollupWindow.between(
            first, end, step=step, event=event, per_stream=not slice_kwargs.get("error_group_id")
        )
        rows = window.slice(**slice_kwargs).bucketed(EPOCH, step)
    else:
        raw = Delivery.objects.slice(**slice_kwargs).between(first, end)
        if event:
            raw = key_matches(raw, [f"event:{event}"])
        rows = raw.bucketed(EPOCH, step)
    buckets = fill_buckets(rows, start, end, step)
    chart = bar_chart(buckets, list_link(slice_kwargs, event), width=width, height=height, zone=zone)
    return Timeline(start, end, step, from_rollups, buckets, chart, zone)
