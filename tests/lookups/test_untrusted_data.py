"""Upstream data is third-party data: hostile names, broken metadata and odd URLs render safely."""

from __future__ import annotations

import json
import re
from typing import Any

from django.test import Client

from tests.lookups.conftest import APTOS_CREATOR, BAYC, CannedUpstream, make_source

SCRIPT = "<script>alert('pwned')</script>"


def owner(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "token_address": BAYC,
        "token_id": "1",
        "owner_of": "0x" + "ab" * 20,
        "contract_type": "ERC721",
        "block_number": "19000000",
        "block_number_minted": "18000000",
        "name": "Safe",
        "symbol": "SAFE",
        "token_hash": "f" * 32,
        "last_token_uri_sync": "2024-05-01T10:00:00.000Z",
        "last_metadata_sync": "2024-05-01T10:00:02.000Z",
        "possible_spam": False,
        "amount": "1",
        "verified_collection": False,
        "token_uri": "https://example.com/1.json",
        "metadata": json.dumps({"name": "Fine #1", "image": "https://example.com/1.png"}),
        "normalized_metadata": None,
    }
    record.update(overrides)
    return record


def attributes_with_urls(html: str) -> list[str]:
    """Link and image URLs in the results (the page around them is not upstream data)."""
    results = html[html.index('<section id="lookup-results"') :]
    return re.findall(r'(?:href|src)="([^"]*)"', results)


def test_hostile_owner_records_are_escaped_and_their_urls_dropped(
    viewer_client: Client, db: None, canned_upstream: CannedUpstream
) -> None:
    make_source(evm_base_url=canned_upstream.base_url)
    records = [
        owner(
            token_id="2",
            name=SCRIPT,
            symbol='"><img src=x onerror=alert(1)>',
            owner_of=SCRIPT,
            metadata=json.dumps(
                {
                    "name": f"{SCRIPT} #2",
                    "image": "javascript:alert(document.cookie)",
                    "external_url": "data:text/html,<script>alert(1)</script>",
                    "attributes": [{"trait_type": SCRIPT, "value": "<b>bold</b>"}],
                }
            ),
            token_uri="javascript:alert(2)",
            media={
                "status": "success",
                "original_media_url": "javascript:alert(3)",
                "media_collection": {"low": {"url": "jAvAsCrIpT:alert(4)", "width": 1, "height": 1}},
            },
            possible_spam=True,
        ),
        owner(token_id="3", metadata='{"name": "half a document", "image": '),
        owner(token_id="4", metadata="</pre><script>alert(5)</script>"),
        owner(
            token_id="5",
            media={"status": "success", "media_collection": {"low": {"url": "ipfs://QmCid/5.png"}}},
        ),
        "not an object",
        {"token_id": "6"},
    ]
    canned_upstream.answers[f"/api/v2/nft/{BAYC}/owners"] = (
        200,
        {"status": "SYNCED", "total": 6, "page": 1, "page_size": 100, "cursor": None, "result": records},
    )
    response = viewer_client.get("/lookups/owners/", {"address": BAYC, "media_items": "on"})
    assert response.status_code == 200
    html = response.content.decode()

    assert "<script>alert" not in html
    assert "<img src=x" not in html  # only ever as text
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    for url in attributes_with_urls(html):
        assert url.startswith(("/", "?", "https://", "http://")), url
    assert "javascript:" not in " ".join(attributes_with_urls(html)).lower()
    # ipfs:// goes through a public gateway.
    assert 'src="https://ipfs.io/ipfs/QmCid/5.png"' in html
    # Broken metadata is shown as received, marked, escaped.
    assert html.count("This metadata is not valid JSON; shown as received.") == 2
    assert "{&quot;name&quot;: &quot;half a document&quot;, &quot;image&quot;: " in html
    assert "&lt;/pre&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in html
    # The spam flag, and the two unreadable records reported rather than dropped silently.
    assert "possible spam" in html
    assert "2 records in this page could not be read" in html
    assert '<strong class="js-total">6</strong>' in html


def test_hostile_creator_records_are_escaped(
    viewer_client: Client, db: None, canned_upstream: CannedUpstream
) -> None:
    make_source(aptos_mainnet_base_url=canned_upstream.base_url)
    item = {
        "collection_data_id_hash": "c" * 64,
        "collection_name": SCRIPT,
        "creator_address": APTOS_CREATOR,
        "default_properties": None,
        "description": "<img src=x onerror=alert(1)>",
        "description_mutable": True,
        "largest_property_version": "0",
        "last_transaction_timestamp": "2024-02-03T04:05:06.789012Z",
        "last_transaction_version": "1234567",
        "maximum": "18446744073709551615",
        "maximum_mutable": False,
        "metadata_uri": "javascript:alert(1)",
        "name": SCRIPT,
        "payee_address": APTOS_CREATOR,
        "properties_mutable": False,
        "royalty_mutable": True,
        "royalty_points_denominator": "1000",
        "royalty_points_numerator": "25",
        "supply": "3",
        "token_data_id_hash": "d" * 64,
        "uri_mutable": False,
    }
    canned_upstream.answers["/nfts/creators"] = (
        200,
        {"cursor": None, "hasNextPage": False, "result": [item]},
    )
    response = viewer_client.get("/lookups/creators/", {"addresses": APTOS_CREATOR})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html.lower()
    assert "2.5 %" in html
    assert "3 / unlimited" in html
    assert "2024-02-03 04:05:06" in html and "1234567" in html
    assert ">description</span>" in html and ">royalty</span>" in html
    # The query the canned host received used the repeated key.
    assert f"creator_addresses={APTOS_CREATOR}" in canned_upstream.seen[0]


def test_a_direction_override_typed_into_a_field_is_shown_in_its_message(viewer_client: Client, db: None) -> None:
    make_source()
    for url, params in (
        ("/lookups/creators/", {"addresses": "\u202e0x1"}),
        ("/lookups/owners/", {"address": "\u202e0x1", "chain": "eth"}),
        ("/lookups/owners/", {"address": BAYC, "chain": "\u202eeth"}),
    ):
        response = viewer_client.get(url, params)
        assert response.status_code == 400, params
        errors = re.findall(r'<p class="field-error">(.*?)</p>', response.content.decode(), re.S)
        assert errors, params
        assert all("\u202e" not in e for e in errors), errors
        assert any("\u27e8U+202E\u27e9" in e for e in errors), errors
