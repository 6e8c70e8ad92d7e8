"""The timeline charts' SVG (`templatetags/charts.py`: the delivered/failed bars and the latency lines) is built in
Python; it is the markup the template loops it replaced rendered (kept as the reference in
`tests/web/reference/bar_chart.html` and `latency_chart.html`), for full, sparse, empty and hostile charts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.template import Context, Template

from dashboard.deliveries.latency import Percentiles
from dashboard.web.charts import Bucket, LinePoint, bar_chart, fill_buckets, line_chart

REFERENCE = Path(__file__).parent / "reference"
BARS_BEFORE = Template((REFERENCE / "bar_chart.html").read_text())
BARS_NOW = Template('{% include "web/_chart.html" %}')
LINES_BEFORE = Template((REFERENCE / "latency_chart.html").read_text())
LINES_NOW = Template('{% include "web/_latency_chart.html" %}')
HOSTILE = '<img src=x onerror=alert(1)> & "quoted" \'single\''
START = datetime(2026, 11, 2, 6, 0, tzinfo=UTC)


def _same(html: str) -> str:
    # The loops put line breaks and indentation between elements; the markup is otherwise the same.
    return re.sub(r"\s*\n\s*", "", html).strip()


def _bars(counts: list[tuple[int, int]], step: timedelta, zone: str = "UTC") -> object:
    buckets = [Bucket(START + i * step, START + (i + 1) * step, ok, bad) for i, (ok, bad) in enumerate(counts)]

    def link(bucket: Bucket, status: str | None) -> str:
        return f"/deliveries/?tag={HOSTILE}&start={bucket.start:%H:%M}" + (f"&status={status}" if status else "")

    return bar_chart(buckets, link, zone=ZoneInfo(zone))


@pytest.mark.parametrize(
    "chart",
    [
        _bars([(i * 37 % 1000, i * 13 % 17) for i in range(120)], timedelta(hours=6)),
        _bars([(5, 0), (0, 3), (0, 0), (1_234_567, 89)], timedelta(hours=1), "Asia/Kolkata"),
        _bars([(7, 1)] * 60, timedelta(minutes=1), "America/St_Johns"),
        _bars([(0, 0)] * 24, timedelta(hours=1)),
        bar_chart([], lambda b, s: ""),
    ],
    ids=["month", "sparse-in-kolkata", "hour-in-st-johns", "all-zero", "no-buckets"],
)
def test_the_bars_are_the_template_loops_bars(chart: object) -> None:
    context = Context({"chart": chart})
    now = BARS_NOW.render(context)
    assert _same(now) == _same(BARS_BEFORE.render(context))
    assert "<img" not in now


def test_the_bars_escape_their_links_and_titles() -> None:
    chart = _bars([(3, 2)], timedelta(hours=1))
    now = BARS_NOW.render(Context({"chart": chart}))
    assert now.count('class="bar"') == 1 and now.count('class="bar-fail"') == 1
    assert "tag=&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quoted&quot; &#x27;single&#x27;&amp;start=06:00" in now


def _points(values: list[tuple[float | None, float | None, float | None]], zone: str) -> list[LinePoint]:
    step = timedelta(hours=6)
    return [
        LinePoint(START + i * step, START + (i + 1) * step, v, f"slot {i} {HOSTILE}",
                  f"/deliveries/?min_latency={i}&tag={HOSTILE}" if v[0] is not None else "")
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("values", "zone"),
    [
        ([(1.0 + i % 7, 2.5 + i % 11, 40.0 + i) for i in range(120)], "UTC"),
        # Gaps break the lines; a lone value is a dot.
        ([(1.2, 3.4, 5.6), (None, None, None), (0.4, None, 9.9), (2.0, 30.0, 3600.5), (None, None, None),
          (7.0, 8.0, 9.0)], "Europe/Berlin"),
    ],
    ids=["month", "gaps-in-berlin"],
)
def test_the_latency_lines_are_the_template_loops_lines(
    values: list[tuple[float | None, float | None, float | None]], zone: str
) -> None:
    chart = line_chart(_points(values, zone), ("p50", "p95", "p99"), zone=ZoneInfo(zone))
    context = Context({"chart": chart, "label": f"Unconfirmed {HOSTILE}", "percentiles": Percentiles(9, 1.25, 30.0, None)})
    now = LINES_NOW.render(context)
    assert _same(now) == _same(LINES_BEFORE.render(context))
    assert "<img" not in now and "<polyline" in now
    assert ("lat-dot" in now) == (zone != "UTC")


def test_a_chart_of_real_buckets_matches_too() -> None:
    start = datetime(2026, 11, 20, 17, 23, tzinfo=UTC)
    rows = [{"bucket": start.replace(minute=0) + timedelta(hours=h), "delivered": h * 3, "failed": h % 4}
            for h in range(0, 24, 2)]
    chart = bar_chart(fill_buckets(rows, start, start + timedelta(hours=24), timedelta(hours=1)), lambda b, s: "/x?a=1&b=2")
    context = Context({"chart": chart})
    assert _same(BARS_NOW.render(context)) == _same(BARS_BEFORE.render(context))


def test_list_links_quote_as_urlencode_does() -> None:
    from urllib.parse import urlencode

    from dashboard.deliveries.links import deliveries_list_query, query_string

    pairs = [("tag", HOSTILE), ("url", "https://h.example/a b?c=d&e=ü"), ("chain", "0x1"), ("n", 5), ("e", "")]
    for _ in range(2):  # the second time from the remembered quoting
        assert query_string(pairs) == urlencode(pairs)
    assert deliveries_list_query(tag=HOSTILE, retries=3, q="") == urlencode([("tag", HOSTILE), ("retries", "3")])
