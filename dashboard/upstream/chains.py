"""The EVM chains: one table of ids, the provider's names, display names, block explorers, block times and
confirmations, and the address checks every operation makes before it sends anything.

Pages, the admin, the deliveries filter and the upstream operations all read `CHAINS`. The confirmations are
the provider's published finality (contract §5: Ethereum 12, BNB Chain 18, Polygon, Avalanche, Fantom and
Cronos 100; other chains a setting of ours); the simulator's chain table (`simulator/catalog.py`, which
imports nothing from here) holds the same block times and confirmations, and a test compares the two.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dashboard.upstream import errors


@dataclass(frozen=True)
class Chain:
    hex_id: str
    # The provider's name for the chain, as its API takes it ("eth", "bsc testnet").
    name: str
    display_name: str
    # Block explorer root; paths /tx/<hash>, /address/<address>, /block/<number>, /token/<address> follow.
    explorer_url: str
    # Other spellings people type.
    aliases: tuple[str, ...] = ()
    # Seconds between two blocks, on average.
    block_seconds: float = 12.0
    # Blocks after a block before the provider sends its confirmed delivery.
    confirmations: int = 100

    @property
    def finality_seconds(self) -> int:
        """Roughly how long after a block its confirmed delivery follows the unconfirmed one: the
        confirmations times the block time, rounded up."""
        return math.ceil(self.confirmations * self.block_seconds)


CHAINS: tuple[Chain, ...] = (
    Chain("0x1", "eth", "Ethereum", "https://etherscan.io", ("ethereum", "mainnet"), 12.0, 12),
    Chain("0x5", "goerli", "Goerli", "https://goerli.etherscan.io", (), 12.0, 12),
    Chain("0xaa36a7", "sepolia", "Sepolia", "https://sepolia.etherscan.io", (), 12.0, 12),
    Chain("0x89", "polygon", "Polygon", "https://polygonscan.com", ("matic",), 2.1, 100),
    Chain("0x13881", "mumbai", "Mumbai", "https://mumbai.polygonscan.com", (), 2.1, 100),
    Chain("0x38", "bsc", "BNB Chain", "https://bscscan.com", ("bnb", "binance"), 3.0, 18),
    Chain(
        "0x61", "bsc testnet", "BNB Testnet", "https://testnet.bscscan.com",
        ("bsc_testnet", "bsc-testnet", "bsctestnet"), 3.0, 18,
    ),
    Chain("0xa86a", "avalanche", "Avalanche", "https://snowtrace.io", ("avax",), 2.0, 100),
    Chain("0xfa", "fantom", "Fantom", "https://ftmscan.com", ("ftm",), 1.0, 100),
    Chain("0x2a15c308d", "palm", "Palm", "https://palm.chainlens.com", (), 5.0, 20),
    Chain("0x19", "cronos", "Cronos", "https://cronoscan.com", (), 5.7, 100),
    Chain("0xa4b1", "arbitrum", "Arbitrum", "https://arbiscan.io", ("arbitrum one",), 0.26, 100),
)
_BY_HEX: dict[str, Chain] = {c.hex_id: c for c in CHAINS}
_BY_NAME: dict[str, Chain] = {key: c for c in CHAINS for key in (c.name, *c.aliases)}
# The provider's name -> hex id, in the table's order (the owners lookup's chain menu).
EVM_CHAINS: dict[str, str] = {c.name: c.hex_id for c in CHAINS}
CHAIN_NAMES: dict[str, str] = {c.hex_id: c.name for c in CHAINS}

EVM_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
APTOS_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{1,64}$")


def find_chain(value: str | int | None) -> Chain | None:
    """The chain given by the provider's name or an alias ("eth", "BSC Testnet", "matic"), hex id ("0x89",
    "0x0089") or decimal id (137, "137"); None for anything else."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _BY_HEX.get(hex(value)) if value >= 0 else None
    text = " ".join(value.strip().lower().split())
    if text in _BY_NAME:
        return _BY_NAME[text]
    if re.fullmatch(r"0x0*[0-9a-f]{1,16}", text):
        return _BY_HEX.get(hex(int(text, 16)))
    if re.fullmatch(r"\d{1,20}", text):
        return _BY_HEX.get(hex(int(text)))
    return None


def normalize_chain(value: str | int) -> str:
    """The hex chain id for a chain given in any form `find_chain` reads.

    Raises InvalidRequest for anything the provider does not serve, so no request goes out.
    """
    chain = find_chain(value)
    if chain is None:
        raise errors.InvalidRequest(
            f"unknown chain {str(value)[:40]!r}; expected one of {', '.join(EVM_CHAINS)}"
        )
    return chain.hex_id


def chain_name(value: str | int) -> str:
    """The provider's name for a chain given in any accepted form."""
    return CHAIN_NAMES[normalize_chain(value)]


def validate_evm_address(value: object, *, what: str = "address") -> str:
    """A 0x + 40 hex address, lower-cased; InvalidRequest naming the bad value otherwise."""
    if not isinstance(value, str) or not EVM_ADDRESS.match(value.strip()):
        raise errors.InvalidRequest(f"invalid {what} {_shown(value)}: expected 0x followed by 40 hex digits")
    return value.strip().lower()


def validate_aptos_address(value: object, *, what: str = "creator address") -> str:
    """A 0x + 64 hex Aptos address, lower-cased; short forms ("0x1") are zero-padded as Aptos defines them."""
    if not isinstance(value, str) or not APTOS_ADDRESS.match(value.strip()):
        raise errors.InvalidRequest(f"invalid {what} {_shown(value)}: expected 0x followed by 64 hex digits")
    return "0x" + value.strip()[2:].lower().rjust(64, "0")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "...'"
