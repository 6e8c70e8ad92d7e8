"""Zooming a timeline chart in Chromium: a drag across the plot lands on the same page with that window, a
plain click still opens the bar's deliveries, "Reset zoom" goes back, and a viewer in another time zone is
offered the chart in it. All under the Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from dashboard.sources.models import Source
from tests.browser.fixtures import context_for, screenshot
from tests.browser.test_csp import Violations
from tests.factories import make_source
from tests.web.conftest import record, store

pytestmark = pytest.mark.browser


@pytest.fixture
def history(transactional_db: None) -> Source:
    source = make_source("zoom")
    now = timezone.now()
    store(source, *(record(date=now - timedelta(minutes=17 * i), error="socket hang up" if i % 5 == 0 else "",
                           retries=1 if i % 5 == 0 else 0, block=100 + i) for i in range(80)))
    return source


def _plot(page: Any) -> dict[str, Any]:
    """The chart's time range and the plot's edges in page pixels."""
    svg = page.locator("svg.js-zoom").first
    box = svg.bounding_box()
    scale = box["width"] / 1000  # viewBox width; the chart is drawn at the page's width
    return {
        "start": datetime.fromisoformat(svg.get_attribute("data-start")),
        "end": datetime.fromisoformat(svg.get_attribute("data-end")),
        "left": box["x"] + float(svg.get_attribute("data-plot-left")) * scale,
        "right": box["x"] + float(svg.get_attribute("data-plot-right")) * scale,
        "y": box["y"] + box["height"] / 2,
    }


def _time_at(plot: dict[str, Any], x: float) -> datetime:
    fraction = (x - plot["left"]) / (plot["right"] - plot["left"])
    return plot["start"] + (plot["end"] - plot["start"]) * fraction


def _drag(page: Any, x0: float, x1: float, y: float) -> None:
    page.mouse.move(x0, y)
    page.mouse.down()
    for step in range(1, 6):
        page.mouse.move(x0 + (x1 - x0) * step / 5, y)
    page.mouse.up()


def _window(url: str) -> tuple[datetime, datetime, dict[str, list[str]]]:
    params = parse_qs(urlsplit(url).query)
    start = datetime.fromisoformat(params["start"][0]).replace(tzinfo=UTC)
    end = datetime.fromisoformat(params["end"][0]).replace(tzinfo=UTC)
    return start, end, params


@pytest.mark.parametrize("path", ["/timeline/?range=24h", "/?range=24h"])
def test_dragging_across_a_chart_opens_that_window(page: Any, history: Source, path: str) -> None:
    violations = Violations(page)
    page.goto(path)
    plot = _plot(page)
    width = plot["right"] - plot["left"]
    x0, x1 = plot["left"] + width * 0.55, plot["left"] + width * 0.85
    want_start, want_end = _time_at(plot, x0), _time_at(plot, x1)

    with page.expect_navigation():
        _drag(page, x1, x0, plot["y"])  # right to left works too
    start, end, params = _window(page.url)
    assert params["range"] == ["custom"]
    # Minute-rounded, and within a pixel or two of where the drag began and ended (24 h over ~1300 px).
    assert abs(start - want_start) < timedelta(minutes=4) and abs(end - want_end) < timedelta(minutes=4)
    assert urlsplit(page.url).path == urlsplit(path).path
    screenshot(page, "chart-zoomed-" + ("timeline" if path.startswith("/timeline/") else "overview"))

    # The page shows that window: finer buckets, every one inside it.
    zoomed = _plot(page)
    assert start - timedelta(minutes=5) <= zoomed["start"] <= start
    assert end <= zoomed["end"] <= end + timedelta(minutes=5)
    assert page.locator("a.js-reset-zoom").is_visible()

    # Zooming again narrows further; Reset zoom goes back to the page's own range.
    plot = zoomed
    with page.expect_navigation():
        _drag(page, plot["left"] + 10, plot["left"] + (plot["right"] - plot["left"]) / 2, plot["y"])
    inner_start, inner_end, _ = _window(page.url)
    assert start - timedelta(minutes=1) <= inner_start < inner_end <= end
    with page.expect_navigation():
        page.click("a.js-reset-zoom")
    assert "start" not in parse_qs(urlsplit(page.url).query)
    assert page.locator("a.js-reset-zoom").count() == 0
    assert violations.all() == []


def test_a_click_without_a_drag_still_opens_the_bars_deliveries(page: Any, history: Source) -> None:
    page.goto("/timeline/?range=24h")
    # A bar whose middle is its own (the failures' segment, drawn over it, opens the failures instead).
    index = page.evaluate(
        "() => [...document.querySelectorAll('svg.js-zoom a.bar')].findLastIndex(a => {"
        " const r = a.querySelector('rect.hit').getBoundingClientRect();"
        " return a.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); })"
    )
    assert index >= 0
    bar = page.locator("svg.js-zoom a.bar").nth(index)
    href = bar.get_attribute("href")
    with page.expect_navigation():
        bar.locator("rect.hit").click()
    assert urlsplit(page.url).path == "/deliveries/"
    assert parse_qs(urlsplit(page.url).query)["start"] == parse_qs(urlsplit(href).query)["start"]


@pytest.fixture
def berlin_page(browser: Any, live_server: Any, staff_user: User) -> Iterator[Any]:
    context = context_for(browser, live_server, staff_user, timezone_id="Europe/Berlin")
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def test_a_viewer_is_offered_the_chart_in_their_time_zone(berlin_page: Any, history: Source) -> None:
    violations = Violations(berlin_page)
    berlin_page.goto("/timeline/?range=24h")
    assert berlin_page.locator(".js-zone-name").inner_text() == "UTC"
    offer = berlin_page.locator("a.js-my-zone")
    assert offer.inner_text() == "show in Europe/Berlin"
    with berlin_page.expect_navigation():
        offer.click()
    assert parse_qs(urlsplit(berlin_page.url).query)["tz"] == ["Europe/Berlin"]
    assert berlin_page.locator(".js-zone-name").inner_text() == "Europe/Berlin"
    assert berlin_page.locator("a.js-my-zone").is_hidden()  # already shown in it
    # A zoom keeps the zone; the URL's window stays in UTC.
    plot = _plot(berlin_page)
    with berlin_page.expect_navigation():
        _drag(berlin_page, plot["left"] + 100, plot["left"] + 400, plot["y"])
    start, _, params = _window(berlin_page.url)
    assert params["tz"] == ["Europe/Berlin"]
    assert abs(start - _time_at(plot, plot["left"] + 100)) < timedelta(minutes=4)
    local = start.astimezone(ZoneInfo("Europe/Berlin"))
    assert f"{local:%Y-%m-%d %H:%M} CE" in berlin_page.locator(".page-head .sub").inner_text()
    screenshot(berlin_page, "chart-zoomed-berlin")
    assert violations.all() == []


def test_the_admin_looks_like_the_dashboard(page: Any, history: Source) -> None:
    page.goto("/admin/deliveries/delivery/")
    header = page.locator("#header")
    assert header.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(17, 24, 39)"  # the top bar's
    assert "Stream Dashboard" in header.inner_text()
    first_date = page.locator("#result_list tbody tr th a").first.inner_text()
    assert first_date.endswith(" UTC") and datetime.strptime(first_date, "%Y-%m-%d %H:%M:%S UTC")
    screenshot(page, "admin-dashboard-look")
