"""The first page: how deliveries are doing right now, what is failing, and whether polling keeps up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import ErrorGroup, HourlyRollup
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.deliveries.trailing_counts import trailing_counts
from dashboard.replica import reads_replica
from dashboard.sources.models import Source
from dashboard.web import timeline
from dashboard.web.forms import ChartRangeForm
from dashboard.web.stats import group_rows
from dashboard.web.views.common import bad_filters, render_live

WORST = 5


@viewer_required
@reads_replica
def overview(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    form = ChartRangeForm(request.GET, now=now)
    if not form.is_valid():
        return bad_filters(request, form, title="Overview", nav="overview")
    window = form.cleaned_data["window"]

    recent = trailing_counts(now, (1, 24))
    day_ago = HourlyRollup.hour_of(now - timedelta(hours=24))
    week_ago = HourlyRollup.hour_of(now - timedelta(days=7))
    rows = RollupWindow.between(week_ago, None, split_at=day_ago).by_dimensions(
        "stream_id", "tag", "webhook_url", "error_group_id"
    )
    week_total = sum(r["total"] for r in rows)
    week_failed = sum(r["failed"] for r in rows)

    streams = group_rows(rows, "stream_id")
    urls = group_rows(rows, "webhook_url")
    groups = group_rows((r for r in rows if r["error_group_id"]), "error_group_id")
    open_groups = {key: g for key, g in groups.items() if g.failed_recent}
    worst_streams = sorted((s for s in streams.values() if s.failed_recent), key=lambda s: -s.failed_recent)
    worst_urls = sorted((u for u in urls.values() if u.failed_recent), key=lambda u: -u.failed_recent)
    top_groups = sorted(open_groups.values(), key=lambda g: -g.failed_recent)[:WORST]
    if top_groups:
        templates = dict(
            ErrorGroup.objects.filter(pk__in=[g.key for g in top_groups]).values_list("pk", "template")
        )
        for g in top_groups:
            g.label = templates.get(g.key, "")

    sources = list(Source.objects.order_by("name"))
    source_states = [(s, s.problem(now)) for s in sources]
    chart = timeline.build(window.start, window.end, {}, zone=form.cleaned_data["tz"])
    cards = [
        _card("Last hour", "1h", recent["total_1"], recent["failed_1"]),
        _card("Last 24 hours", "24h", recent["total_24"], recent["failed_24"]),
        _card("Last 7 days", "7d", week_total, week_failed),
    ]

    context = {
        "nav": "overview",
        "now": now,
        "window": window,
        "cards": cards,
        "chart_note": _chart_note(chart, next((c for c in cards if c["range"] == window.preset), None)),
        "open_group_count": len(open_groups),
        "worst_streams": worst_streams[:WORST],
        "worst_urls": worst_urls[:WORST],
        "top_groups": top_groups,
        "source_states": source_states,
        "timeline": chart,
        "clamped": form.cleaned_data["clamped"],
        "day_ago": day_ago,
    }
    return render_live(request, "web/overview.html", "web/_overview_partial.html", context)


def _chart_note(chart: timeline.Timeline, card: dict[str, Any] | None) -> str:
    """Why the chart's totals differ from the card of the same range, or "" when they agree.

    The card counts exactly the trailing window (raw rows at its edges); the chart's bars are whole
    buckets, so its first bar reaches back to the bucket's start."""
    if card is None:
        return ""
    total = chart.chart.delivered + chart.chart.failed
    if (total, chart.chart.failed) == (card["total"], card["failed"]):
        return ""
    more, more_failing = total - int(card["total"]), chart.chart.failed - int(card["failed"])
    first = chart.buckets[0].start if chart.buckets else chart.start
    if first < chart.start:
        local = first.astimezone(chart.zone)
        reason = (
            f"its first {chart.step_label} bar starts at {local:%H:%M} {local.tzname()}, "
            f"{_minutes(chart.start - first)} before the card's window"
        )
    else:
        reason = "the card and the chart were read a moment apart"
    return (
        f"The chart counts {more:+,} deliveries ({more_failing:+,} failing) against the "
        f"\u201c{card['label']}\u201d card: {reason}."
    )


def _minutes(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _card(label: str, range_key: str, total: int, failed: int) -> dict[str, object]:
    return {"label": label, "range": range_key, "total": total, "failed": failed, "ok": total - failed}
