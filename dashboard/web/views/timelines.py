"""Delivered versus failed over time for all deliveries or one stream, tag or webhook URL."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import Stream
from dashboard.web import timeline
from dashboard.web.forms import MENU_WINDOW, SliceForm
from dashboard.web.views.common import bad_filters


@viewer_required
def timeline_page(request: HttpRequest) -> HttpResponse:
    form = SliceForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Timeline", nav="timeline")
    window = form.cleaned_data["window"]
    slice_kwargs = form.slice_kwargs()
    result = timeline.build(window.start, window.end, slice_kwargs)
    context = {
        "nav": "timeline",
        "form": form,
        "window": window,
        "timeline": result,
        "slice": slice_kwargs,
        "options": Stream.objects.slice_options(timezone.now() - MENU_WINDOW),
        "success_rate": (100.0 * result.chart.delivered / (result.chart.delivered + result.chart.failed))
        if not result.chart.empty
        else None,
    }
    return render(request, "web/timeline.html", context)
