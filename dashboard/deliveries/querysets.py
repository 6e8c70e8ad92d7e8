"""Query building blocks the delivery QuerySets (in models.py) share: the slice filters both tables
understand, so a chart drawn from the rollups and a list read from raw deliveries always agree on what a
slice is, and Postgres's date_bin."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import Value

from dashboard.deliveries.status import FAILING_STATUSES


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


class SliceFilters:
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
