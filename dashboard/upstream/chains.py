"""EVM chain names and ids, and the address checks every operation makes before it sends anything."""

from __future__ import annotations

import re

from dashboard.upstream import errors

# The chains the owners operation accepts, by the provider's name, with their hex ids.
EVM_CHAINS: dict[str, str] = {
    "eth": "0x1",
    "goerli": "0x5",
    "sepolia": "0xaa36a7",
    "polygon": "0x89",
    "mumbai": "0x13881",
    "bsc": "0x38",
    "bsc testnet": "0x61",
    "avalanche": "0xa86a",
    "fantom": "0xfa",
    "palm": "0x2a15c308d",
    "cronos": "0x19",
    "arbitrum": "0xa4b1",
}
CHAIN_NAMES: dict[str, str] = {hex_id: name for name, hex_id in EVM_CHAINS.items()}
# Other spellings people type; all resolve to one of the provider's names.
ALIASES: dict[str, str] = {
    "ethereum": "eth",
    "mainnet": "eth",
    "matic": "polygon",
    "avax": "avalanche",
    "bnb": "bsc",
    "binance": "bsc",
    "bsc_testnet": "bsc testnet",
    "bsc-testnet": "bsc testnet",
    "bsctestnet": "bsc testnet",
    "arbitrum one": "arbitrum",
    "ftm": "fantom",
}

EVM_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
APTOS_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{1,64}$")


def normalize_chain(value: str | int) -> str:
    """The hex chain id for a chain given by name ("eth", "BSC Testnet"), hex id ("0x89") or decimal id (137).

    Raises InvalidRequest for anything the provider does not serve, so no request goes out.
    """
    if isinstance(value, bool):
        raise errors.InvalidRequest(f"unknown chain {value!r}")
    if isinstance(value, int):
        hex_id = hex(value)
    else:
        text = " ".join(str(value).strip().lower().split())
        text = ALIASES.get(text, text)
        if text in EVM_CHAINS:
            return EVM_CHAINS[text]
        if re.fullmatch(r"0x0*[0-9a-f]{1,16}", text):
            hex_id = hex(int(text, 16))
        elif re.fullmatch(r"\d{1,20}", text):
            hex_id = hex(int(text))
        else:
            raise errors.InvalidRequest(
                f"unknown chain {str(value)[:40]!r}; expected one of {', '.join(EVM_CHAINS)}"
            )
    if hex_id not in CHAIN_NAMES:
        raise errors.InvalidRequest(
            f"unknown chain {str(value)[:40]!r}; expected one of {', '.join(EVM_CHAINS)}"
        )
    return hex_id


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
