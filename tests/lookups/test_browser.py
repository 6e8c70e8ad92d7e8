"""The lookup pages in headless Chromium against a live server and the simulator, with screenshots."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.fixtures import screenshot, wait_until
from tests.lookups.conftest import APTOS_CREATOR, APTOS_CREATOR_2, BAYC, fresh_contract

pytestmark = pytest.mark.browser


def test_owners_lookup_with_media_metadata_and_paging(page: Any, source: Any) -> None:  # noqa: F811
    page.goto("/lookups/owners/")
    assert page.locator("nav.mainnav a.active").inner_text() == "Owners"
    screenshot(page, "lookups-owners-empty")

    page.fill("#id_address", BAYC)
    page.select_option("#id_chain", "eth")
    page.select_option("#id_format", "decimal")
    page.fill("#id_limit", "20")
    page.check("#id_normalize_metadata")
    page.check("#id_media_items")
    page.click("form.lookup-form button[type=submit]")
    page.wait_for_selector("table.owners-table")
    assert "address=" + BAYC in page.url and "media_items=on" in page.url
    assert page.locator("tr.owner-row").count() == 20
    assert "BoredApeYachtClub" in page.locator(".result-summary").inner_text()
    wait_until(
        page, "Array.from(document.querySelectorAll('img.js-thumb')).every(i => i.complete && i.naturalWidth > 0)"
    )
    # The thumbnails are the simulator's own pictures, loaded with no internet.
    assert page.locator("img.js-thumb[src*='/media/']").count() > 0
    first_ids = page.locator(".token-id").all_inner_texts()
    page.locator("details.metadata:has(pre.metadata-json) summary").nth(1).click()
    assert page.locator("details.metadata[open] pre.metadata-json").first.is_visible()
    screenshot(page, "lookups-owners-results")

    page.click("a.js-next")
    page.wait_for_selector("text=Page 2")
    assert page.locator(".token-id").all_inner_texts() != first_ids
    page.click("a.js-prev")
    page.wait_for_selector("text=Page 1")
    assert page.locator(".token-id").all_inner_texts() == first_ids


def test_a_new_contract_refreshes_itself_until_indexed(
    page: Any,  # noqa: F811
    source: Any,
    simulator: Any,
    settings: Any,
) -> None:
    settings.LOOKUPS_SYNC_REFRESH_SECONDS = 1
    page.goto(f"/lookups/owners/?address={fresh_contract()}&chain=0x1")
    banner = page.locator(".js-syncing")
    assert "Indexing started." in banner.inner_text()
    screenshot(page, "lookups-owners-syncing")

    simulator.world.clock.advance(30)
    page.wait_for_selector(".js-synced", timeout=15_000)
    assert page.locator(".js-syncing").count() == 0
    assert page.locator(".js-status").inner_text() == "SYNCED"
    screenshot(page, "lookups-owners-synced")


def test_bad_input_is_marked_on_the_form(page: Any, source: Any) -> None:  # noqa: F811
    page.goto("/lookups/owners/?address=0xnothex&chain=0x89")
    assert "is not a contract address" in page.locator(".field-address .field-error").inner_text()
    assert "Nothing was sent to the upstream" in page.locator(".js-invalid").inner_text()
    assert page.locator("#id_chain").input_value() == "polygon"
    screenshot(page, "lookups-owners-invalid")

    page.goto("/lookups/creators/")
    page.fill("#id_addresses", f"{APTOS_CREATOR}\nnot-an-address")
    page.click("form.lookup-form button[type=submit]")
    assert "Address 2, “not-an-address”, is not an Aptos address" in page.locator(".field-error").inner_text()
    screenshot(page, "lookups-creators-invalid")


def test_creators_lookup_grouped_and_paged(page: Any, source: Any) -> None:  # noqa: F811
    page.goto("/lookups/creators/")
    assert page.locator("nav.mainnav a.active").inner_text() == "Creators"
    screenshot(page, "lookups-creators-empty")
    page.fill("#id_addresses", f"{APTOS_CREATOR}\n{APTOS_CREATOR_2}")
    page.select_option("#id_network", "mainnet")
    page.fill("#id_limit", "30")
    page.click("form.lookup-form button[type=submit]")

    page.wait_for_selector("article.collection-group")
    assert page.locator("tr.creator-row").count() == 30
    screenshot(page, "lookups-creators-results")
    page.click("a.js-next")
    page.wait_for_selector("text=Page 2")
    page.click("a.js-prev")
    page.wait_for_selector("text=Page 1")


def test_upstream_trouble_reads_as_a_message(page: Any, source: Any, simulator: Any) -> None:  # noqa: F811
    simulator.world.faults.rate_429 = 1.0
    simulator.world.faults.retry_after = 12
    page.goto(f"/lookups/owners/?address={BAYC}")
    assert "retry in 12 s" in page.locator("[data-problem=rate_limited]").inner_text()
    screenshot(page, "lookups-owners-rate-limited")
