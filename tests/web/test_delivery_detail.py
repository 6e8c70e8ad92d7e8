from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from dashboard.sources.models import Source
from tests.web.conftest import ADDR, NFT, TX, record, store

pytestmark = pytest.mark.django_db


def test_it_shows_summary_tables_and_links(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    (d,) = store(plain_source, record(error="timeout of 10000ms exceeded", retries=2, block=18400123))
    # session, user, the viewer role (user and group permissions), sync banner, the delivery with its error group
    # and source, the replays asked for it, the changes polls saw (its attempt history), its confirmed/unconfirmed
    # pair
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + its stream's status at the provider, read for a retrying delivery (retries stop once it is not active)
    with django_assert_num_queries(11):
        response = logged_in_client.get(f"/deliveries/{d.pk}/")
    assert response.status_code == 200
    body = response.content.decode()
    for title in ("Summary", "tinyPayload", "Logs", "Transactions", "NFT transfers", "ABI", "Raw payload"):
        assert title in body
    assert f"https://etherscan.io/tx/{TX}" in body
    assert f"https://etherscan.io/address/{ADDR}" in body
    assert "https://etherscan.io/block/18400123" in body
    assert f"/search/?q={TX}" in body
    assert f"/lookups/owners/?address={NFT}&amp;chain=0x1" in body
    # The same block number on another chain is another block: the link keeps to this chain.
    assert "/deliveries/?q=block:18400123&amp;chain=0x1" in body
    assert "balance=42" in body  # log triggers
    assert "Transfer(address indexed from)" in body
    assert "Next attempt" in body and "The schedule runs out" in body


def test_an_unknown_delivery_is_a_404(logged_in_client: Client) -> None:
    assert logged_in_client.get("/deliveries/00000000-0000-4000-8000-000000000000/").status_code == 404


def test_hostile_payload_text_is_escaped_and_odd_text_is_visible(plain_source: Source, logged_in_client: Client) -> None:
    payload = {
        "block": {"number": "1", "hash": "<script>alert('hash')</script>", "timestamp": None},
        "chainId": "0x1",
        "logs": [{"logIndex": None, "transactionHash": "<script>x</script>", "address": "\u202etxe.exe",
                  "data": "zero\u200bwidth \u0007bell 🦄 日本語"}],
        "<img src=x onerror=alert(1)>": {"nested": [None, True, 1.5, "</details><script>y</script>"]},
    }
    (d,) = store(plain_source, record(tag="<b>tag</b>", payload=payload))
    body = logged_in_client.get(f"/deliveries/{d.pk}/").content.decode()
    assert "<script>" not in body.replace('<script src="/static/dashboard/app.js" defer></script>', "")
    assert "<img src=x" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "⟨U+202E⟩txe.exe" in body and "⟨U+200B⟩" in body and "⟨U+0007⟩" in body
    assert "🦄 日本語" in body
    assert '<span class="jnull">null</span>' in body


def test_a_megabyte_payload_is_clipped_with_a_way_to_see_all(plain_source: Source, logged_in_client: Client) -> None:
    logs = [
        {"logIndex": str(i), "transactionHash": TX, "address": ADDR, "data": "0x" + "f" * 2000, "topic0": TX}
        for i in range(600)
    ]
    (d,) = store(plain_source, record(payload={"block": {"number": "1"}, "chainId": "0x1", "logs": logs}))
    response = logged_in_client.get(f"/deliveries/{d.pk}/")
    body = response.content.decode()
    assert response.context["large"]
    assert len(response.context["tables"][0].rows) == 100
    assert "first 100 of 600" in body
    assert "Show everything" in body
    assert len(body) < 1_000_000
    assert response.context["tree_cut"]

    full = logged_in_client.get(f"/deliveries/{d.pk}/?full=1")
    assert len(full.context["tables"][0].rows) == 600

    raw = logged_in_client.get(f"/deliveries/{d.pk}/payload.json")
    assert raw["Content-Type"] == "application/json"
    assert len(json.loads(raw.content)["logs"]) == 600


def test_a_delivery_without_payload(plain_source: Source, logged_in_client: Client) -> None:
    rec = record()
    rec["payload"] = None
    del rec["payload"]
    (d,) = store(plain_source, rec)
    body = logged_in_client.get(f"/deliveries/{d.pk}/").content.decode()
    assert "came without a payload" in body
