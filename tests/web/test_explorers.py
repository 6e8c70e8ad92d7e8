"""Chain names, explorer links and the deliveries list's chain filter, all read from the one chain table."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.http import QueryDict

from dashboard.upstream.chains import CHAINS
from dashboard.web.explorers import chain_name, explorer_url, owners_lookup_url
from dashboard.web.forms import DeliveryFilterForm

ADDR = "0x" + "cd" * 20


def test_every_chain_in_the_table_has_a_name_and_explorer_links() -> None:
    for chain in CHAINS:
        assert chain_name(chain.hex_id) == chain.display_name
        assert explorer_url(chain.hex_id, "address", ADDR) == f"{chain.explorer_url}/address/{ADDR}"
        shouted = chain.hex_id.upper().replace("0X", "0x")
        assert explorer_url(shouted, "block", 7) == f"{chain.explorer_url}/block/7"


def test_unknown_chains_are_shown_as_given_and_link_nowhere() -> None:
    assert chain_name("0x9999") == "0x9999"
    assert chain_name("") == chain_name(None) == "—"
    assert explorer_url("0x9999", "tx", "0x" + "ab" * 32) is None
    assert explorer_url("0x1", "tx", "") is None


def test_a_chain_given_by_the_providers_name_is_shown_by_its_display_name() -> None:
    # The deliveries list echoes the chain filter as typed (?chain=polygon).
    assert chain_name("polygon") == "Polygon"
    assert chain_name("bsc testnet") == "BNB Testnet"


def test_the_owners_lookup_link_is_the_lookups_page() -> None:
    assert owners_lookup_url(ADDR, "0x89") == f"/lookups/owners/?address={ADDR}&chain=0x89"
    assert owners_lookup_url(ADDR, None) == f"/lookups/owners/?address={ADDR}"


@pytest.mark.parametrize(
    ("given", "cleaned"),
    [
        ("polygon", "0x89"), ("matic", "0x89"), ("ETH", "0x1"), ("bsc testnet", "0x61"), ("137", "0x89"),
        ("0x89", "0x89"), ("0x0089", "0x89"), ("0x9999", "0x9999"), ("0x00abc", "0xabc"), ("", ""),
    ],
)  # fmt: skip
def test_the_deliveries_chain_filter_takes_names_and_any_hex_id(given: str, cleaned: str) -> None:
    form = DeliveryFilterForm(QueryDict(urlencode({"chain": given})))
    assert form.is_valid(), form.errors
    assert form.cleaned_data["chain"] == cleaned


@pytest.mark.parametrize("given", ["solana", "ethereum-classic", "0xzz", "-1"])
def test_the_deliveries_chain_filter_rejects_other_text(given: str) -> None:
    form = DeliveryFilterForm(QueryDict(urlencode({"chain": given})))
    assert not form.is_valid()
    assert "A chain is a hex chain id" in str(form.errors["chain"])
