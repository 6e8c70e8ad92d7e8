"""The dashboard in headless Chromium on the simulator's history: every main page, filtering, drill-down
from a chart bar to a payload, search and CSV export. Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.utils import timezone

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from tests.browser.fixtures import screenshot, wait_until
from tests.conftest import SIMULATOR_KEY

pytestmark = pytest.mark.browser


@pytest.fixture
def filled(transactional_db: None, simulator: Any) -> Source:
    source = Source.objects.create(
        name="simulator",
        api_key=SIMULATOR_KEY,
        streams_base_url=simulator.base_url,
        evm_base_url=simulator.base_url,
        aptos_mainnet_base_url=simulator.base_url,
        aptos_testnet_base_url=simulator.base_url,
        last_success_at=timezone.now(),
        newest_upstream_date=timezone.now(),
    )
    records = simulator.world.history_records(include_payload=True)
    for start in range(0, len(records), 1000):
        store_records(source, records[start : start + 1000])
    return source


def test_every_main_page_renders(page: Any, filled: Source) -> None:
    failing = Delivery.objects.failures().exclude(payload=None).newest_first().first()
    assert failing is not None
    pages = [
        ("/", "Overview", "overview"),
        ("/streams/", "Streams", "streams"),
        ("/timeline/?range=7d", "Timeline", "timeline"),
        ("/deliveries/", "Deliveries", "deliveries"),
        ("/errors/", "Error groups", "errors"),
        ("/retries/", "Retries", "retries"),
        (f"/deliveries/{failing.pk}/", "Delivery to", "delivery-detail"),
        ("/search/", "Search", "search"),
    ]
    for path, heading, name in pages:
        response = page.goto(path)
        assert response.status == 200, path
        assert page.locator("h1").first.inner_text().startswith(heading), path
        screenshot(page, name)

    response = page.goto("/deliveries/?retries=99&start=yesterday")
    assert response.status == 400
    assert "The provider retries at most 7 times." in page.locator(".js-errors").inner_text()
    screenshot(page, "bad-filter")


def test_filtering_the_list_puts_the_filters_in_the_url(page: Any, filled: Source) -> None:
    page.goto("/deliveries/")
    page.select_option("select[name=status]", "failing")
    page.select_option("select[name=range]", "7d")
    page.click("button:has-text('Apply filters')")
    page.wait_for_url("**/deliveries/?*status=failing*")
    assert "range=7d" in page.url and "stream=" not in page.url  # empty fields stay out of the URL
    statuses = page.locator("#deliveries-table tbody .status").all_inner_texts()
    assert statuses and set(statuses) <= {"Retrying", "Failed"}
    assert page.locator(".filter-summary").inner_text().count("×") == 2
    screenshot(page, "deliveries-filtered")

    # The next page is a keyset link, and the filters travel with it.
    if page.locator("a[rel=next]").count():
        page.click("a[rel=next]")
        page.wait_for_url("**after=*")
        assert "status=failing" in page.url


def test_drill_down_from_a_failure_bar_to_the_payload(page: Any, filled: Source) -> None:
    page.goto("/timeline/?range=7d")
    page.locator("svg.chart a.bar-fail").first.click()
    page.wait_for_url("**/deliveries/?*status=failing*")
    rows = page.locator("#deliveries-table tbody tr.clickable")
    assert rows.count() >= 1
    rows.first.locator("td").nth(3).click()  # a plain cell: the whole row is a link
    page.wait_for_url("**/deliveries/*-*/")
    assert page.locator("h2:has-text('Summary')").is_visible()
    assert page.locator("h2:has-text('Latest error')").is_visible()
    page.click("button[data-tree=collapse]")
    page.click("button[data-tree=expand]")
    assert page.locator(".json details[open]").count() > 3
    screenshot(page, "delivery-drilldown")


def test_search_from_the_top_box(page: Any, filled: Source) -> None:
    delivery = Delivery.objects.exclude(payload=None).exclude(search_keys=[]).first()
    tx = next(k for k in delivery.search_keys if k.startswith("tx:"))[3:]
    page.goto("/")
    page.fill(".topsearch input", tx.upper().replace("0X", "0x"))
    page.press(".topsearch input", "Enter")
    page.wait_for_url("**/search/?q=*")
    assert "transaction hash or topic" in page.locator(".page-head .sub").inner_text()
    assert page.locator("#deliveries-table tbody tr.clickable").count() >= 1
    screenshot(page, "search-results")

    page.fill(".topsearch input", "0x<script>alert(1)</script>")
    page.press(".topsearch input", "Enter")
    page.wait_for_load_state()
    assert "is not a search key" in page.locator(".js-errors").inner_text()


def test_export_downloads_exactly_the_filtered_set(page: Any, filled: Source) -> None:
    page.goto("/deliveries/?status=failing")
    with page.expect_download() as info:
        page.click("a:has-text('Export CSV')")
    text = open(info.value.path(), encoding="utf-8").read()
    rows = list(csv.reader(io.StringIO(text)))
    expected = Delivery.objects.failures().count()
    assert len(rows) - 1 == expected
    assert {r[10] for r in rows[1:]} <= {"retrying", "failed"}


def test_live_refresh_can_be_paused(page: Any, filled: Source) -> None:
    page.goto("/")
    toggle = page.locator(".js-live-toggle")
    assert toggle.inner_text() == "Pause"
    toggle.click()
    assert toggle.inner_text() == "Resume"
    assert "Paused" in page.locator(".js-live-label").inner_text()
    page.reload()
    assert page.locator(".js-live-toggle").inner_text() == "Resume"  # remembered
    page.locator(".js-live-toggle").click()
    wait_until(page, "document.querySelector('.js-live-label').textContent.includes('updated')", timeout=30)
    assert page.locator("#overview-live .cards").is_visible()


def test_the_error_column_stays_readable_at_1024_px(page: Any, filled: Source) -> None:
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto("/deliveries/?status=failing")
    cells = page.locator("#deliveries-table tbody td.fill")
    assert cells.count() > 0
    boxes = [cells.nth(i).bounding_box() for i in range(min(5, cells.count()))]
    # Wide enough for a few words per line, and inside the window, not cut off by the panel's edge.
    assert all(b is not None and b["width"] >= 200 and b["x"] + b["width"] <= 1024 for b in boxes), boxes
    assert cells.first.inner_text().strip()
    assert page.locator("#deliveries-table td.fill .clamp").first.evaluate(
        "el => getComputedStyle(el).webkitLineClamp"
    ) == "3"
    # The table fits the window: no sideways scrolling to reach the error.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1024 + 1
    assert "match" in page.locator(".js-matched").inner_text()
    screenshot(page, "deliveries-1024")
