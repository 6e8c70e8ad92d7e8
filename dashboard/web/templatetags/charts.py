"""The SVG of the timeline charts (`web.charts`: the delivered/failed bars and the latency lines), built in one
pass. A month's chart is ~120 bars or slots and ~360 points, and a template loop spent ~0.15 ms on each (a dozen
variables resolved, every coordinate localized as a number, every title and link escaped): ~20 ms of a timeline
page. The markup is the loop's (`tests/web/reference/`), every text escaped as the template escaped it."""

from __future__ import annotations

import html

from django import template
from django.template.defaultfilters import floatformat
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from dashboard.deliveries.latency import Percentiles
from dashboard.web.charts import BarChart, LineChart, Tick

register = template.Library()


@register.simple_tag
def bar_chart_svg(chart: BarChart) -> SafeString:
    """The stacked delivered/failed bars (`charts.bar_chart`), each a link to its deliveries and its red part to
    its failures; an empty chart says so."""
    if chart.empty:
        return mark_safe('<div class="chart-empty">No deliveries in this range.</div>')
    parts = [
        f'<svg class="chart js-zoom" viewBox="0 0 {chart.width} {chart.height}" role="img" '
        f'aria-label="Delivered and failed deliveries over time: {chart.delivered} delivered, {chart.failed} failed" '
        f'{_zoom_data(chart)}>',
        *_y_axis(chart.y_ticks, chart.plot_left, chart.width),
    ]
    for b in chart.bars:
        title = _escape(b.title)
        bar = (
            f'<a href="{_escape(b.href)}" class="bar"><title>{title} — open these deliveries</title>'
            f'<rect class="hit" x="{b.x}" y="0" width="{b.width}" height="{chart.plot_bottom}"></rect>'
        )
        if b.ok_h:
            bar += f'<rect class="ok" x="{b.x}" y="{b.ok_y}" width="{b.width}" height="{b.ok_h}" rx="1"></rect>'
        parts.append(bar + "</a>")
        if b.fail_h:
            parts.append(
                f'<a href="{_escape(b.fail_href)}" class="bar-fail"><title>{title} — open the failures</title>'
                f'<rect class="fail" x="{b.x}" y="{b.fail_y}" width="{b.width}" height="{b.fail_h}" rx="1"></rect></a>'
            )
    parts += _x_axis(chart.x_ticks, chart.height)
    parts.append("</svg>")
    return mark_safe("\n".join(parts))  # noqa: S308 - every text above is escaped


@register.simple_tag
def latency_chart_svg(chart: LineChart, label: str, percentiles: Percentiles) -> SafeString:
    """p50, p95 and p99 over time on a timeline chart's axes (`charts.line_chart`); each slot links to its slowest
    deliveries, and dragging across it zooms the page's window as on the bars."""
    figures = ", ".join(
        f"{name} {floatformat(value, 1)} s"
        for name, value in (("p50", percentiles.p50), ("p95", percentiles.p95), ("p99", percentiles.p99))
    )
    parts = [
        f'<svg class="chart latency-chart js-zoom" viewBox="0 0 {chart.width} {chart.height}" {_zoom_data(chart)} '
        f'role="img" aria-label="{_escape(label)} latency over time: {figures} over the window">',
        *_y_axis(chart.y_ticks, chart.plot_left, chart.width),
        "".join(
            f'<a href="{_escape(s.href)}"><title>{_escape(s.title)} — open the deliveries at or above its p95</title>'
            f'<rect class="hit" x="{s.x}" y="0" width="{s.width}" height="{chart.plot_bottom}"></rect></a>'
            for s in chart.slots
            if s.href
        ),
    ]
    for line in chart.lines:
        name = _escape(line.name)
        parts += [f'<polyline class="lat lat-{name}" points="{points}"></polyline>' for points in line.segments]
        parts += [f'<circle class="lat-dot lat-{name}" cx="{x}" cy="{y}" r="2"></circle>' for x, y in line.dots]
    parts += _x_axis(chart.x_ticks, chart.height)
    parts.append("</svg>")
    return mark_safe("\n".join(parts))  # noqa: S308 - every text above is escaped


def _zoom_data(chart: BarChart | LineChart) -> str:
    """Where the chart's time starts and ends and the plot's edges, for app.js's zooming by dragging."""
    start = timezone.localtime(chart.start).isoformat() if chart.start else ""
    end = timezone.localtime(chart.end).isoformat() if chart.end else ""
    return (
        f'data-start="{start}" data-end="{end}" data-plot-left="{chart.plot_left}" '
        f'data-plot-right="{chart.plot_right}"'
    )


def _y_axis(ticks: list[Tick], left: int, width: int) -> list[str]:
    return [
        f'<line class="grid-line" x1="{left}" x2="{width}" y1="{t.pos}" y2="{t.pos}"></line>\n'
        f'<text class="axis" x="{left - 8}" y="{t.pos}" text-anchor="end" dominant-baseline="middle">'
        f"{_escape(t.label)}</text>"
        for t in ticks
    ]


def _x_axis(ticks: list[Tick], height: int) -> list[str]:
    return [f'<text class="axis" x="{t.pos}" y="{height - 6}">{_escape(t.label)}</text>' for t in ticks]


def _escape(value: object) -> str:
    return html.escape(str(value))
