"""The timeline's latency panel in Chromium: its table, charts and per-chain table fit the page, its lines are
drawn in their colours, dragging across a latency chart zooms the page's window, a point opens its bucket's
slowest deliveries. All under the Content-Security-Policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from dashboard.sources.models import Source
from tests.browser.fixtures import screenshot
from tests.browser.test_chart_zoom import _drag
from tests.browser.test_csp import Violations
from tests.factories import make_source
from tests.web.conftest import STREAM_B, URL_B, store
from tests.web.test_timeline_latency import timed

pytestmark = pytest.mark.browser


@pytest.fixture
def latencies(transactional_db: None) -> Source:
    source = make_source("latency")
    now = timezone.now()
    ago = [now - timedelta(hours=h, minutes=10) for h in range(0, 30)]
    store(
        source,
        *(timed(at, s, block=100 + i) for i, at in enumerate(ago) for s in (1.5, 2.5, 3.5 + i % 4)),
        *(timed(at, 150 + 10 * (i % 5), confirmed=True, block=100 + i) for i, at in enumerate(ago)),
        *(timed(at, 12 + i % 20, chain="0x89", stream_id=STREAM_B, tag="beta", url=URL_B, block=500 + i)
          for i, at in enumerate(ago)),
    )
    return source


def test_the_panel_fits_and_its_chart_zooms(page: Any, latencies: Source) -> None:
    violations = Violations(page)
    page.goto("/timeline/?range=24h")
    panel = page.locator("#latency")
    assert panel.locator("#timeline-latency").is_visible() and panel.locator("#latency-by-chain").is_visible()
    assert panel.locator("svg.latency-chart").count() == 2
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440
    assert page.evaluate("() => { const p = document.querySelector('#latency'); return p.scrollWidth <= p.clientWidth + 1 }")
    stroke = page.evaluate("getComputedStyle(document.querySelector('#latency polyline.lat-p95')).stroke")
    assert stroke not in ("", "none")
    panel.scroll_into_view_if_needed()
    screenshot(page, "timeline-latency")

    # Dragging across the unconfirmed chart opens the page's window between those times.
    svg = panel.locator("svg.latency-chart").first
    box = svg.bounding_box()
    scale = box["width"] / 1000
    left = box["x"] + float(svg.get_attribute("data-plot-left")) * scale
    right = box["x"] + float(svg.get_attribute("data-plot-right")) * scale
    with page.expect_navigation():
        _drag(page, left + (right - left) * 0.3, left + (right - left) * 0.7, box["y"] + box["height"] / 2)
    params = parse_qs(urlsplit(page.url).query)
    assert params["range"] == ["custom"] and urlsplit(page.url).path == "/timeline/"
    assert violations.all() == []


def test_a_point_opens_its_buckets_slowest_deliveries(page: Any, latencies: Source) -> None:
    page.goto("/timeline/?range=24h&tag=beta")
    link = page.locator("#latency svg.latency-chart a").nth(3)
    with page.expect_navigation():
        link.locator("rect.hit").click()
    params = parse_qs(urlsplit(page.url).query)
    assert urlsplit(page.url).path == "/deliveries/"
    assert params["tag"] == ["beta"] and params["confirmed"] == ["false"] and "min_latency" in params
