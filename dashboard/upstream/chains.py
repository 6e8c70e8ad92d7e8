"""The EVM chains: one table of ids, the provider's names, display names and block explorers, and the
address checks every operation makes before it sends anything.

Pages, the admin, the deliveries filter and the upstream operations all read `CHAINS`.
"""

from __future__ import annotations

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
    # Roughly how long after a block its confirmed delivery follows the unconfirmed one: the provider's
    # confirmation depth times the block time, rounded up.
    finality_seconds: int = 900


CHAINS: tuple[Chain, ...] = (
    Chain("0x1", "eth", "Ethereum", "https://etherscan.io", ("ethereum", "mainnet"), finality_seconds=300),
    Chain("0x5", "goerli", "Goerli", "https://goerli.etherscan.io", finality_seconds=300),
    Chain("0xaa36a7", "sepolia", "Sepolia", "https://sepolia.etherscan.io", finality_seconds=300),
    Chain("0x89", "polygon", "Polygon", "https://polygonscan.com", ("matic",), finality_seconds=600),
    Chain("0x13881", "mumbai", "Mumbai", "https://mumbai.polygonscan.com", finality_seconds=600),
    Chain("0x38", "bsc", "BNB Chain", "https://bscscan.com", ("bnb", "binance"), finality_seconds=180),
    Chain(
        "0x61", "bsc testnet", "BNB Testnet", "https://testnet.bscscan.com",
        ("bsc_testnet", "bsc-testnet", "bsctestnet"), finality_seconds=180,
    ),
    Chain("0xa86a", "avalanche", "Avalanche", "https://snowtrace.io", ("avax",), finality_seconds=60),
    Chain("0xfa", "fantom", "Fantom", "https://ftmscan.com", ("ftm",), finality_seconds=60),
    Chain("0x2a15c308d", "palm", "Palm", "https://palm.chainlens.com", finality_seconds=120),
    Chain("0x19", "cronos", "Cronos", "https://cronoscan.com", finality_seconds=120),
    Chain("0xa4b1", "arbitrum", "Arbitrum", "https://arbiscan.io", ("arbitrum one",), finality_seconds=120),
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
