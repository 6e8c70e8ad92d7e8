"""A delivery whose logs and inputs the payload's ABI decodes, read in headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.browser.fixtures import screenshot
from tests.deliveries.test_decoding import ALICE, BOB
from tests.factories import make_source
from tests.web.conftest import record, store
from tests.web.test_decoded_payload import payload

pytestmark = pytest.mark.browser


def test_a_delivery_shows_its_decoded_events_and_calls(page: Any, transactional_db: None) -> None:
    source = make_source("test", last_success_at=timezone.now())
    (d,) = store(source, record(payload=payload()))
    page.goto(f"/deliveries/{d.pk}/")
    events = page.locator("#section-decoded-logs")
    assert events.locator("h2").inner_text().startswith("Decoded events")
    first = events.locator("tbody tr").nth(0).locator(".ev")
    assert first.inner_text() == (
        f"Transfer(from address indexed={ALICE[:8]}…{ALICE[-4:]}↗, to address indexed={BOB[:8]}…{BOB[-4:]}↗, "
        "value uint256=1,250.5 USDC)"
    )
    assert "ids uint256[]=[77], values uint256[]=[3]" in events.locator("tbody tr").nth(1).inner_text()
    assert "raw" in events.locator("tbody tr").nth(2).inner_text()
    assert "no event in the ABI has this topic0" in events.locator("tbody tr").nth(2).inner_text()
    calls = page.locator("#section-decoded-calls")
    assert calls.locator("tbody tr").nth(0).locator(".ev").inner_text() == (
        f"transfer(to address={BOB[:8]}…{BOB[-4:]}↗, amount uint256=1,250.5 USDC)")
    # an argument's address links to our search for it
    first.locator(f"a[href='/search/?q={BOB}']").click()
    page.wait_for_url("**/search/?q=*")
    assert page.locator("#deliveries-table tbody tr.clickable").count() == 1
    page.go_back()
    screenshot(page, "delivery-decoded")


def test_a_simulated_sale_decodes_its_tuples(page: Any, transactional_db: None, simulator: Any) -> None:
    from dashboard.deliveries.ingest import store_records
    from dashboard.deliveries.models import Delivery

    source = make_source("sim", last_success_at=timezone.now())
    records = [r for r in simulator.world.history_records(include_payload=True) if r["tag"] == "nft-sales"][:20]
    store_records(source, records)
    delivery = Delivery.objects.filter(tag="nft-sales").order_by("-records").first()
    assert delivery is not None
    page.goto(f"/deliveries/{delivery.pk}/")
    events = page.locator("#section-decoded-logs").inner_text()
    assert "OrderFulfilled(orderHash bytes32=0x" in events
    assert "offer tuple[]=[(itemType uint8=" in events
    assert "raw" not in page.locator("#section-decoded-logs tbody").inner_text()
    calls = page.locator("#section-decoded-calls").inner_text()
    assert "fulfillBasicOrder(parameters tuple=(considerationToken address=" in calls
    assert "additionalRecipients tuple[]=[(amount uint256=" in calls
    screenshot(page, "delivery-decoded-sale")
