"""Chain names and block-explorer links, so hashes and addresses on every page lead somewhere useful."""

from __future__ import annotations

from urllib.parse import quote, urlencode

# Hex chain id -> (short name, explorer base URL).
CHAINS: dict[str, tuple[str, str]] = {
    "0x1": ("Ethereum", "https://etherscan.io"),
    "0x5": ("Goerli", "https://goerli.etherscan.io"),
    "0xaa36a7": ("Sepolia", "https://sepolia.etherscan.io"),
    "0x89": ("Polygon", "https://polygonscan.com"),
    "0x13881": ("Mumbai", "https://mumbai.polygonscan.com"),
    "0x38": ("BNB Chain", "https://bscscan.com"),
    "0x61": ("BNB Testnet", "https://testnet.bscscan.com"),
    "0xa86a": ("Avalanche", "https://snowtrace.io"),
    "0xfa": ("Fantom", "https://ftmscan.com"),
    "0x19": ("Cronos", "https://cronoscan.com"),
    "0xa4b1": ("Arbitrum", "https://arbiscan.io"),
    "0x2a15c308d": ("Palm", "https://palm.chainlens.com"),
}

OWNERS_LOOKUP_PATH = "/lookups/owners/"


def chain_name(chain_id: str | None) -> str:
    if not chain_id:
        return "—"
    return CHAINS.get(chain_id.lower(), (chain_id, ""))[0]


def explorer_url(chain_id: str | None, kind: str, value: str | int | None) -> str | None:
    """Link to the chain's explorer for a tx hash, an address or a block; None for unknown chains."""
    if not chain_id or value in (None, ""):
        return None
    entry = CHAINS.get(chain_id.lower())
    if entry is None:
        return None
    path = {"tx": "tx", "address": "address", "block": "block", "token": "token"}[kind]
    return f"{entry[1]}/{path}/{quote(str(value), safe='')}"


def owners_lookup_url(address: str, chain_id: str | None) -> str:
    params = {"address": address}
    if chain_id:
        params["chain"] = chain_id
    return f"{OWNERS_LOOKUP_PATH}?{urlencode(params)}"
