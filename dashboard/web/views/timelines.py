"""Delivered versus failed over time, and the latency over time, for all deliveries or one stream, tag, webhook
URL or chain."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import times
from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import EventRollup, Stream
from dashboard.replica import reads_replica
from dashboard.web import latency_panel, timeline
from dashboard.web.forms import MENU_WINDOW, TimelineForm
from dashboard.web.views.common import bad_filters


def timeline_of(data: dict[str, Any], slice_kwargs: dict[str, Any]) -> timeline.Timeline:
    """The delivered and failed counts of a valid `TimelineForm`'s window and slice: the Timeline page's chart
    (and the API's)."""
    window = data["window"]
    return timeline.build(window.start, window.end, slice_kwargs, event=data.get("event") or "", zone=data["tz"])


def latency_of(data: dict[str, Any], slice_kwargs: dict[str, Any]) -> latency_panel.SliceLatency | None:
    """The Timeline page's latency panel (and the API's): the slice's percentiles over the window, over time and per
    chain (unless a chain is chosen, from the same read). Latency histograms are kept per stream, tag, URL and
    chain, not per decoded event: None with an event."""
    if data.get("event"):
        return None
    by = "" if slice_kwargs["chain_id"] else "chain_id"
    return latency_panel.read(data["window"], slice_kwargs, by=by)


@viewer_required
@reads_replica
def timeline_page(request: HttpRequest) -> HttpResponse:
    form = TimelineForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Timeline", nav="timeline")
    window = form.cleaned_data["window"]
    slice_kwargs = form.slice_kwargs()
    event = form.cleaned_data["event"]
    result = timeline_of(form.cleaned_data, slice_kwargs)
    latency = latency_of(form.cleaned_data, slice_kwargs)
    menu_since = timezone.now() - MENU_WINDOW
    context = {
        "nav": "timeline",
        "form": form,
        "window": window,
        "timeline": result,
        "slice": slice_kwargs,
        "options": Stream.objects.slice_options(menu_since),
        "event": event,
        "latency": latency,
        "latency_charts": latency_panel.charts(latency, zone=form.cleaned_data["tz"]) if latency else [],
        "events": EventRollup.objects.event_names(menu_since),
        "clamped": form.cleaned_data["clamped"],
        "zone_names": times.zone_names(),
        "success_rate": (100.0 * result.chart.delivered / (result.chart.delivered + result.chart.failed))
        if not result.chart.empty
        else None,
    }
    return render(request, "web/timeline.html", context)
