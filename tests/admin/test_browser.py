"""The admin searched in Chromium on a large table with hostile payload text, as staff and as a viewer.

Screenshots land in test-artifacts/screenshots/admin-*.png.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from dashboard.accounts.roles import VIEWERS, assign_role
from dashboard.deliveries.ingest import store_records
from dashboard.devtools import generator
from dashboard.devtools.generator import generate_deliveries
from dashboard.sources.models import Source
from tests.admin.conftest import NOW, history_record
from tests.browser.fixtures import screenshot

pytestmark = pytest.mark.browser

URL = "/admin/deliveries/delivery/"
SEED = "browser"


def search(tab: Any, text: str) -> None:
    tab.fill("#searchbar", text)
    tab.click("#changelist-search input[type=submit]")
    tab.wait_for_load_state()


def messages(tab: Any) -> str:
    return " ".join(tab.locator("ul.messagelist li").all_inner_texts())


def rows(tab: Any) -> Any:
    return tab.locator("#result_list tbody tr")


def test_staff_search_a_large_table_with_hostile_text(page: Any, live_server: Any) -> None:
    made = generate_deliveries(100_000, seed=SEED, hostile=True)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(URL)
    assert "(estimated)" in page.locator("p.paginator").inner_text()
    assert rows(page).count() == 50
    screenshot(page, "admin-deliveries-list")
    page.screenshot(path=str(screenshot(page, "admin-deliveries-list")).replace(".png", "-top.png"))

    address = generator.address(SEED, 42)
    search(page, "0x" + address[2:].upper())
    assert "Searched the extracted keys for address " + address in messages(page)
    assert rows(page).count() > 0
    screenshot(page, "admin-search-address")

    search(page, "<script>alert(1)</script>")
    assert "No error message group matches “<script>alert(1)</script>”" in messages(page)
    assert rows(page).count() == 0
    screenshot(page, "admin-search-hostile-text")

    search(page, "0x123")
    assert "is not a search key" in messages(page)
    screenshot(page, "admin-search-bad-input")

    search(page, '<script>alert("error")')
    assert "1 error group match" in messages(page)
    first_error = page.locator("#result_list tbody tr td.field-short_error").first.inner_text()
    assert first_error.startswith('<script>alert("error")</script>')
    screenshot(page, "admin-search-hostile-error")

    page.click(f"#changelist-filter a:has-text('{generator.HOSTILE_TAG[:20]}')")
    page.wait_for_load_state()
    assert rows(page).count() == 50
    assert set(page.locator("td.field-tag").all_inner_texts()) == {generator.HOSTILE_TAG}
    screenshot(page, "admin-filter-hostile-tag")

    page.locator("#result_list tbody tr th a").first.click()
    page.wait_for_load_state()
    payload = page.locator("pre.payload-json").nth(1).inner_text()
    assert generator.HOSTILE_PAYLOAD_TEXT in payload
    assert page.locator("a:has-text('open in the dashboard')").first.get_attribute("href").startswith("/deliveries/")
    screenshot(page, "admin-delivery-detail")

    assert dialogs == [], "markup from upstream ran as script"
    assert made.count == 100_000


def test_a_viewer_is_kept_out_of_the_admin(viewer_page: Any, live_server: Any) -> None:
    source = Source.objects.create(
        name="hostile-source", api_key="viewer-must-never-see-this-key",
        streams_base_url="http://127.0.0.1:9/", evm_base_url="http://127.0.0.1:9/",
        aptos_mainnet_base_url="http://127.0.0.1:9/", aptos_testnet_base_url="http://127.0.0.1:9/",
    )
    record = history_record(error="<script>alert(2)</script> socket hang up", retries=1, tag="<b>secret-tag</b>")
    store_records(source, [record], now=NOW)
    assign_role(User.objects.get(username="viewer"), VIEWERS)
    dialogs: list[str] = []
    viewer_page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    for url in (f"{URL}?q=socket+hang+up", f"{URL}{record['id']}/change/", f"/admin/sources/source/{source.pk}/change/",
                "/admin/auth/user/"):
        viewer_page.goto(url)
        text = viewer_page.content()
        assert "/admin/login/" in viewer_page.url
        assert "not authorized to access this page" in viewer_page.locator("#content").inner_text()
        for secret in ("secret-tag", "socket hang up", "viewer-must-never-see-this-key", "hostile-source"):
            assert secret not in text
    screenshot(viewer_page, "admin-as-viewer")
    assert dialogs == []


def test_change_lists_fit_at_1440_pixels_with_long_upstream_text(page: Any, live_server: Any) -> None:
    source = Source.objects.create(
        name="wide", api_key="k", streams_base_url="http://127.0.0.1:9/", evm_base_url="http://127.0.0.1:9/",
        aptos_mainnet_base_url="http://127.0.0.1:9/", aptos_testnet_base_url="http://127.0.0.1:9/",
    )
    records = [history_record(error="Request failed with status code 500 " * 5, retries=1, tag="t" * 60) for _ in range(3)]
    store_records(source, records, now=NOW)
    page.set_viewport_size({"width": 1440, "height": 900})
    for url in (URL, "/admin/deliveries/errorgroup/"):
        page.goto(url)
        # The table ends within its box, beside the filter column: no column is cut off or hidden past a scroll.
        table, box, width = page.evaluate(
            """() => [document.querySelector('#result_list').getBoundingClientRect().right,
                      document.querySelector('#changelist .results').getBoundingClientRect().right,
                      document.documentElement.scrollWidth]"""
        )
        assert table <= box + 1 and width <= 1440, (url, table, box, width)
    screenshot(page, "admin-deliveries-1440")
