"""Failures grouped by their message template, with where and when each group happens."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypedDict

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.grouping import as_the_viewer_sees
from dashboard.deliveries.models import ErrorGroup, EventRollup
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.replica import reads_replica
from dashboard.web.charts import EPOCH, Sparkline, choose_step, floor_to, sparkline
from dashboard.web.forms import MENU_WINDOW, ErrorGroupsForm
from dashboard.web.views.common import bad_filters

SPARK_BARS = 48


@dataclass
class GroupSpread:
    """An error group's failing deliveries in the window, and where they happened."""

    total: int = 0
    streams: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)

    def add(self, row: dict[str, Any]) -> None:
        self.total += row["n"]
        self.streams.add(row["stream_id"])
        if row["tag"]:
            self.tags.add(row["tag"])
        if row["webhook_url"]:
            self.urls.add(row["webhook_url"])


class ErrorGroupEntry(TypedDict):
    group: ErrorGroup
    stats: GroupSpread
    spark: Sparkline


def error_group_entries(data: dict[str, Any]) -> tuple[list[ErrorGroupEntry], timedelta]:
    """The groups failing in an `ErrorGroupsForm`'s window and slice, most failures first, each with its spread and
    sparkline, and the sparklines' step: the Error groups page's rows (and the API's)."""
    window = data["window"]
    event = data["event"]
    # Sparklines: about SPARK_BARS points across the window, hourly or wider.
    step = choose_step(window.end - window.start, hourly_only=True)
    while (window.end - window.start) / step > SPARK_BARS and step.days < 7:
        step *= 2
    # With an event, only the failures of deliveries holding it: the event rollup, same dimensions and sums.
    rollups = (
        RollupWindow.between(window.start, window.end, step=step, event=event)
        .slice(stream_id=data.get("stream") or None, tag=data.get("tag") or None, webhook_url=data.get("url") or None)
        .exclude(error_group=None)
    )
    failures = rollups.failures_by_group(EPOCH, step)
    spreads: dict[int, GroupSpread] = {}
    for row in failures.where:
        spread = spreads.get(row["error_group_id"])
        if spread is None:
            spread = spreads[row["error_group_id"]] = GroupSpread()
        spread.add(row)
    start = floor_to(window.start, step)
    slots = []
    cursor = start
    while cursor < window.end:
        slots.append(cursor)
        cursor += step
    series: dict[int, dict] = defaultdict(dict)
    for row in failures.when:
        series[row["error_group_id"]][row["bucket"]] = row["n"]

    groups = ErrorGroup.objects.in_bulk(list(spreads))
    as_the_viewer_sees(list(groups.values()))
    entries: list[ErrorGroupEntry] = []
    for key, spread in spreads.items():
        group = groups.get(key)
        if group is None:
            continue
        points = [series[key].get(slot, 0) for slot in slots]
        entries.append({"group": group, "stats": spread, "spark": sparkline(points)})
    entries.sort(key=lambda e: (-e["stats"].total, -e["group"].last_seen.timestamp()))
    return entries, step


@viewer_required
@reads_replica
def error_groups(request: HttpRequest) -> HttpResponse:
    form = ErrorGroupsForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Error groups", nav="errors")
    data = form.cleaned_data
    window = data["window"]
    event = data["event"]
    entries, step = error_group_entries(data)
    context = {
        "nav": "errors",
        "form": form,
        "window": window,
        "entries": entries,
        "spark_step": step,
        "total_failures": sum(e["stats"].total for e in entries),
        "event": event,
        "events": EventRollup.objects.event_names(timezone.now() - MENU_WINDOW),
        # The other filters, kept when the event menu is submitted.
        "kept": [(name, request.GET[name]) for name in ("range", "start", "end", "stream", "tag", "url")
                 if request.GET.get(name)],
    }
    return render(request, "web/errors.html", context)
