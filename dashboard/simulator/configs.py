"""Each simulated stream's configuration as the provider holds it: topic0 filter, ABI, flags and addresses.

`GET /streams/evm` shows the configuration and `GET /streams/evm/{id}/address` the addresses, so a client can
build a block preview's body (contract §5) from what it reads; the preview (preview.py) matches a block's
activity against the same configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dashboard.simulator import catalog, scenario
from dashboard.simulator.payloads import (
    ABIS,
    ERC20_APPROVAL,
    ERC20_TRANSFER,
    ERC721_TRANSFER,
    ERC1155_TRANSFER_BATCH,
    ERC1155_TRANSFER_SINGLE,
    SEAPORT,
    SEAPORT_ORDER_FULFILLED,
    UNISWAP_PAIRS,
    UNISWAP_V2_SWAP,
    signature,
    watched_wallet,
)

if TYPE_CHECKING:
    from dashboard.simulator.history import Stream

# The stream's topic0 filter, in the provider's signature format, per kind of stream.
TOPICS = {
    "erc20": [signature(ERC20_TRANSFER), signature(ERC20_APPROVAL)],
    "sale": [signature(SEAPORT_ORDER_FULFILLED), signature(ERC721_TRANSFER), signature(ERC1155_TRANSFER_SINGLE)],
    "erc1155": [signature(ERC1155_TRANSFER_SINGLE), signature(ERC1155_TRANSFER_BATCH)],
    "mint": [signature(ERC721_TRANSFER)],
    "swap": [signature(UNISWAP_V2_SWAP)],
}
# Kinds that watch a wallet's native transfers rather than contracts' logs.
NATIVE_KINDS = ("native", "deposits")


def addresses(seed: int, stream: Stream) -> list[str]:
    """The addresses the stream watches (lower case): the contracts whose logs it matches, or its wallet."""
    chain = stream.chain.hex_id
    found: list[str]
    if stream.kind == "erc20":
        tokens = [t for t in catalog.erc20_tokens_on(chain) if t.symbol == stream.token]
        found = [t.address for t in tokens or catalog.ERC20_TOKENS[:1]]
    elif stream.kind == "sale":
        contracts = catalog.nft_contracts_on(chain) or list(catalog.NFT_CONTRACTS[:1])
        found = [c.address for c in contracts] + [SEAPORT]
    elif stream.kind in ("erc1155", "mint"):
        wanted = "ERC1155" if stream.kind == "erc1155" else "ERC721"
        found = [c.address for c in catalog.nft_contracts_on(chain) if c.contract_type == wanted]
    elif stream.kind == "swap":
        found = [pair.address for pair, _ in UNISWAP_PAIRS]
    else:
        found = [watched_wallet(seed, stream.id)]
    # Addresses added by a scripted reload: held by the stream from then on, and before it they matched
    # nothing (scenario.py), so listing them throughout changes no match.
    found += [r.added for r in scenario.RELOADS if r.tag == stream.tag]
    return [a.lower() for a in found]


def config(stream: Stream) -> dict[str, Any]:
    """The configuration fields of the stream as `GET /streams/evm` shows them (addresses apart)."""
    native = stream.kind in NATIVE_KINDS
    return {
        "topic0": TOPICS.get(stream.kind),
        "allAddresses": False,
        "includeNativeTxs": native,
        "includeContractLogs": stream.kind in TOPICS,
        "includeInternalTxs": native,
        "includeAllTxLogs": False,
        "getNativeBalances": [],
        "abi": ABIS.get(stream.kind) if not native else None,
        "advancedOptions": None,
        "triggers": None,
    }
