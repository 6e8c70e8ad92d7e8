"""Delivered-versus-failed counts over a window for any slice, from the right table for the range."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.rollup_window import RollupWindow
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

    @property
    def step_label(self) -> str:
        minutes = int(self.step.total_seconds() // 60)
        if minutes < 60:
            return f"{minutes} min"
        if minutes < 1440:
            return f"{minutes // 60} h"
        return f"{minutes // 1440} d"


def list_link(slice_kwargs: dict[str, Any]) -> Callable[[Bucket, str | None], str]:
    """Link from a bucket to the deliveries list of exactly that slice and time."""
    base = reverse("web:deliveries")
    names = {"stream_id": "stream", "tag": "tag", "webhook_url": "url"}
    fixed = {names[k]: v for k, v in slice_kwargs.items() if v}

    def link(bucket: Bucket, status: str | None) -> str:
        params = dict(fixed)
        params.update(
            range="custom", start=bucket.start.strftime(LINK_FORMAT), end=bucket.end.strftime(LINK_FORMAT)
        )
        if status:
            params["status"] = status
        return f"{base}?{urlencode(params)}"

    return link


def build(start: datetime, end: datetime, slice_kwargs: dict[str, Any], *, width: int = 1000,
          height: int = 200) -> Timeline:
    span = end - start
    from_rollups = span >= ROLLUP_FROM
    step = choose_step(span, hourly_only=from_rollups)
    first = floor_to(start, step)
    if from_rollups:
        rows = RollupWindow.between(first, end, step=step).slice(**slice_kwargs).bucketed(EPOCH, step)
    else:
        rows = Delivery.objects.slice(**slice_kwargs).between(first, end).bucketed(EPOCH, step)
    buckets = fill_buckets(rows, start, end, step)
    chart = bar_chart(buckets, list_link(slice_kwargs), width=width, height=height)
    return Timeline(start, end, step, from_rollups, buckets, chart)
