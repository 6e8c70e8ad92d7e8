"""Retry statistics per stream or tag, and the deliveries still waiting on the provider's schedule."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.accounts.access import viewer_required
from dashboard.actions.models import ReplayItem
from dashboard.deliveries.models import Delivery, Stream
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES, retry_schedule
from dashboard.replica import reads_replica
from dashboard.web.forms import RetryStatsForm
from dashboard.web.retry_stats import RetryRow, retry_rows
from dashboard.web.views.common import bad_filters

STILL_FAILING_ROWS = 100


def retry_slice(data: dict[str, Any]) -> dict[str, Any]:
    return {"stream_id": data.get("stream") or None, "tag": data.get("tag") or None}


def retry_statistics_rows(data: dict[str, Any]) -> tuple[list[RetryRow], RetryRow]:
    """The retry statistics of a valid `RetryStatsForm`'s window and slice, per stream or tag (most retried
    first) and over all: the Retries page's table (and the API's). A replay's delivery counts at its exact time."""
    window = data["window"]
    by = data.get("by") or "stream"
    dimension = "stream_id" if by == "stream" else "tag"
    slice_kwargs = retry_slice(data)
    distribution = RollupWindow.between(window.start, window.end).slice(**slice_kwargs).retry_distribution(
        *(("stream_id", "tag") if by == "stream" else ("tag",))
    )
    rows, overall = retry_rows(distribution, dimension)
    by_key = {row.key: row for row in rows}
    for key, retries, seconds in ReplayItem.objects.recoveries(window.start, window.end, dimension, **slice_kwargs):
        for row in (by_key.get(key), overall):
            if row is not None:
                row.add_exact(retries, seconds)
    return rows, overall


@viewer_required
@reads_replica
def retry_statistics(request: HttpRequest) -> HttpResponse:
    form = RetryStatsForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Retries", nav="retries")
    data = form.cleaned_data
    window = data["window"]
    by = data.get("by") or "stream"
    slice_kwargs = retry_slice(data)
    rows, overall = retry_statistics_rows(data)

    failing = Delivery.objects.for_list().slice(**slice_kwargs).still_retrying().newest_first()
    still_failing = list(failing[: STILL_FAILING_ROWS + 1])
    stopped = Stream.objects.statuses_not_active(d.stream_id for d in still_failing)
    for d in still_failing:
        d.schedule = retry_schedule(d.date, d.retries, stopped.get(d.stream_id, ""))
    context = {
        "nav": "retries",
        "form": form,
        "window": window,
        "by": by,
        "rows": rows,
        "overall": overall,
        "still_failing": still_failing[:STILL_FAILING_ROWS],
        "more_failing": len(still_failing) > STILL_FAILING_ROWS,
        "retry_columns": list(range(MAX_RETRIES + 1)),
        "schedule": [(k, ATTEMPT_OFFSETS[k]) for k in range(1, MAX_RETRIES + 1)],
    }
    return render(request, "web/retries.html", context)
