"""The chain table: one entry per chain, every spelling resolving to it, a lookup that raises nothing, and the
same block times and confirmations as the simulator's."""

from __future__ import annotations

import math

import pytest

from dashboard.upstream import errors
from dashboard.upstream.chains import CHAIN_NAMES, CHAINS, EVM_CHAINS, chain_name, find_chain, normalize_chain


def test_each_chain_has_one_entry_and_every_spelling_names_one_chain() -> None:
    hex_ids = [c.hex_id for c in CHAINS]
    spellings = [s for c in CHAINS for s in (c.name, *c.aliases)]
    assert len(set(hex_ids)) == len(hex_ids)
    assert len(set(spellings)) == len(spellings)
    assert len({c.display_name for c in CHAINS}) == len(CHAINS)
    for chain in CHAINS:
        # Spelled as ingest stores chain ids and as the lookup normalises what people type.
        assert chain.hex_id == hex(int(chain.hex_id, 16))
        assert all(s == " ".join(s.lower().split()) for s in (chain.name, *chain.aliases))
        assert chain.explorer_url.startswith("https://") and not chain.explorer_url.endswith("/")


def test_the_simulator_confirms_each_chain_when_the_dashboard_expects_it() -> None:
    # The simulator imports nothing from the project, so the two tables are kept equal by hand.
    from dashboard.simulator import catalog

    assert {c.hex_id for c in CHAINS} == set(catalog.CHAINS_BY_HEX)
    for chain in CHAINS:
        simulated = catalog.CHAINS_BY_HEX[chain.hex_id]
        assert simulated.name == chain.name
        assert (simulated.block_seconds, simulated.confirmations) == (chain.block_seconds, chain.confirmations)
        assert chain.finality_seconds == math.ceil(simulated.confirm_seconds)
    # The provider's published confirmations (contract §5).
    published = {"0x1": 12, "0x38": 18, "0x89": 100, "0xa86a": 100, "0xfa": 100, "0x19": 100}
    assert {c.hex_id: c.confirmations for c in CHAINS if c.hex_id in published} == published
    avalanche = find_chain("avalanche")
    assert avalanche is not None and avalanche.finality_seconds == 200


def test_the_providers_names_map_to_hex_ids_both_ways() -> None:
    assert EVM_CHAINS == {c.name: c.hex_id for c in CHAINS}
    assert CHAIN_NAMES == {c.hex_id: c.name for c in CHAINS}
    assert list(EVM_CHAINS)[:2] == ["eth", "goerli"]


@pytest.mark.parametrize(
    ("given", "hex_id"),
    [
        ("eth", "0x1"), ("Ethereum", "0x1"), (" mainnet ", "0x1"), (1, "0x1"), ("1", "0x1"), ("0x01", "0x1"),
        ("polygon", "0x89"), ("MATIC", "0x89"), ("137", "0x89"), ("0X89", "0x89"), ("0x0089", "0x89"),
        ("bsc testnet", "0x61"), ("BSC  Testnet", "0x61"), ("bsc-testnet", "0x61"), (97, "0x61"),
        ("arbitrum one", "0xa4b1"), ("palm", "0x2a15c308d"),
    ],
)  # fmt: skip
def test_find_chain_reads_names_aliases_hex_and_decimal_ids(given: str | int, hex_id: str) -> None:
    chain = find_chain(given)
    assert chain is not None and chain.hex_id == hex_id
    assert normalize_chain(given) == hex_id


@pytest.mark.parametrize("given", ["solana", "0x999", "", " ", "9" * 30, "0x", "eth mainnet", -1, True, None])
def test_find_chain_answers_none_for_anything_else(given: str | int | None) -> None:
    assert find_chain(given) is None


@pytest.mark.parametrize("given", ["solana", "0x999", "", -1, True])
def test_operations_still_refuse_unknown_chains_before_sending(given: str | int) -> None:
    with pytest.raises(errors.InvalidRequest, match="unknown chain"):
        normalize_chain(given)


def test_display_names_follow_the_providers_spelling() -> None:
    testnet = find_chain("0x61")
    assert testnet is not None and (testnet.name, testnet.display_name) == ("bsc testnet", "BNB Testnet")
    assert chain_name("BNB") == "bsc" and chain_name(0xA4B1) == "arbitrum"
