"""Delivered versus failed over time for all deliveries or one stream, tag or webhook URL."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import times
from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import EventRollup, Stream
from dashboard.replica import reads_replica
from dashboard.web import timeline
from dashboard.web.forms import MENU_WINDOW, TimelineForm
from dashboard.web.views.common import bad_filters


@viewer_required
@reads_replica
def timeline_page(request: HttpRequest) -> HttpResponse:
    form = TimelineForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Timeline", nav="timeline")
    window = form.cleaned_data["window"]
    slice_kwargs = form.slice_kwargs()
    event = form.cleaned_data["event"]
    result = timeline.build(window.start, window.end, slice_kwargs, event=event, zone=form.cleaned_data["tz"])
    menu_since = timezone.now() - MENU_WINDOW
    context = {
        "nav": "timeline",
        "form": form,
        "window": window,
        "timeline": result,
        "slice": slice_kwargs,
        "options": Stream.objects.slice_options(menu_since),
        "event": event,
        "events": EventRollup.objects.event_names(menu_since),
        "clamped": form.cleaned_data["clamped"],
        "zone_names": times.zone_names(),
        "success_rate": (100.0 * result.chart.delivered / (result.chart.delivered + result.chart.failed))
        if not result.chart.empty
        else None,
    }
    return render(request, "web/timeline.html", context)
