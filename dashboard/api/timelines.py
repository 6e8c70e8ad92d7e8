"""The numbers behind the Timeline page: delivered and failed per time bucket (`web.views.timelines.timeline_of`)
and the latency panel's percentiles over the window, over time and per chain (`latency_of`), for its form's
filters (`TimelineForm`: window, time zone, stream, tag, URL, chain, and the timeline's decoded event)."""

from typing import Any

from django.http import HttpRequest, QueryDict
from ninja import Field, Query, Router, Schema
from pydantic import create_model

from dashboard.api.pages import on_replica
from dashboard.api.problems import bad_parameters, refuse_unknown
from dashboard.api.schemas import LatencyOut, PercentilesOut, TimelineOut
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries.latency import Latencies
from dashboard.web.forms import TimelineForm
from dashboard.web.views.timelines import latency_of, timeline_of

router = Router(tags=["timelines"])

TIMELINE_FIELDS = list(TimelineForm.base_fields)
# Latency histograms are not kept per decoded event: the latency endpoint does not take `event`.
LATENCY_FIELDS = [name for name in TIMELINE_FIELDS if name != "event"]


def _filters(name: str, fields: list[str]) -> type[Schema]:
    return create_model(  # type: ignore[call-overload, no-any-return]
        name,
        __base__=Schema,
        **{
            field: (str | None, Field(None, description=str(TimelineForm.base_fields[field].label or field)))
            for field in fields
        },
    )


TimelineFilters = _filters("TimelineFilters", TIMELINE_FIELDS)
LatencyFilters = _filters("LatencyFilters", LATENCY_FIELDS)


def _form(request: HttpRequest, fields: list[str]) -> TimelineForm:
    refuse_unknown(request, fields)
    data = QueryDict(mutable=True)
    for name in fields:
        data.setlist(name, request.GET.getlist(name))
    form = TimelineForm(data)
    if not form.is_valid():
        raise bad_parameters(form)
    return form


@router.get("/timeline", response=TimelineOut, summary="Delivered and failed per time bucket (the Timeline page)")
@on_replica
def timeline(request: HttpRequest, filters: Query[TimelineFilters]) -> dict[str, Any]:  # type: ignore[valid-type]
    """The Timeline page's chart for the same filters: the window (default 24 hours; a custom one is cut to what
    is kept, `clamped` says how), buckets of its step (at most 120), their times in `tz`."""
    allow(request, VIEW)
    form = _form(request, TIMELINE_FIELDS)
    result = timeline_of(form.cleaned_data, form.slice_kwargs())
    chart = result.chart
    zone = result.zone
    return {
        "start": result.start.astimezone(zone),
        "end": result.end.astimezone(zone),
        "step_seconds": int(result.step.total_seconds()),
        "zone": result.zone_name,
        "from_rollups": result.from_rollups,
        "delivered": chart.delivered,
        "failed": chart.failed,
        "success_rate": None if chart.empty else 100.0 * chart.delivered / (chart.delivered + chart.failed),
        "clamped": form.cleaned_data["clamped"],
        "buckets": [
            {"start": b.start.astimezone(zone), "end": b.end.astimezone(zone), "delivered": b.delivered,
             "failed": b.failed}
            for b in result.buckets
        ],
    }


def _pair(latency: Latencies) -> dict[str, PercentilesOut]:
    return {
        "unconfirmed": PercentilesOut.from_orm(latency.unconfirmed),
        "confirmed": PercentilesOut.from_orm(latency.confirmed),
    }


@router.get("/latency", response=LatencyOut, summary="Latency p50/p95/p99 over a window, over time and per chain")
@on_replica
def latency(request: HttpRequest, filters: Query[LatencyFilters]) -> dict[str, Any]:  # type: ignore[valid-type]
    """The Timeline page's latency panel (and, with `stream` and the stream page's window, the stream page's) for
    the same filters: processing latency (first attempt − block time) in seconds, unconfirmed and confirmed
    apart, over the window, per step (hourly up to two days, whole six-hour periods beyond, at most 120) and per
    chain unless `chain` names one; `exact` when read from the deliveries themselves rather than the histograms.
    `slowest_*` are the deliveries list's query of the slowest 5 %."""
    allow(request, VIEW)
    form = _form(request, LATENCY_FIELDS)
    read = latency_of(form.cleaned_data, form.slice_kwargs())
    assert read is not None  # no event: always read
    zone = form.cleaned_data["tz"]
    return {
        **_pair(read.latency),
        "start": read.window.start.astimezone(zone) if read.window.start else None,
        "end": read.window.end.astimezone(zone) if read.window.end else None,
        "step_seconds": int(read.step.total_seconds()),
        "exact": read.exact,
        "clamped": form.cleaned_data["clamped"],
        "over_time": [{"start": start.astimezone(zone), **_pair(parts)} for start, parts in read.over_time],
        "by_chain": [{"chain_id": str(chain), **_pair(parts)} for chain, parts in read.by],
        "slowest_unconfirmed": read.slowest_unconfirmed,
        "slowest_confirmed": read.slowest_confirmed,
    }
