"""Chain names and block-explorer links, so hashes and addresses on every page lead somewhere useful.

The chains themselves (names, explorers) are in dashboard.upstream.chains.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from django.urls import reverse

from dashboard.upstream.chains import find_chain

EXPLORER_PATHS = {"tx": "tx", "address": "address", "block": "block", "token": "token"}


def chain_name(chain_id: str | None) -> str:
    """The chain's display name; an unknown chain is shown as given."""
    if not chain_id:
        return "—"
    chain = find_chain(chain_id)
    return chain.display_name if chain is not None else chain_id


def explorer_url(chain_id: str | None, kind: str, value: str | int | None) -> str | None:
    """Link to the chain's explorer for a tx hash, an address or a block; None for unknown chains."""
    if not chain_id or value in (None, ""):
        return None
    chain = find_chain(chain_id)
    if chain is None:
        return None
    return f"{chain.explorer_url}/{EXPLORER_PATHS[kind]}/{quote(str(value), safe='')}"


def owners_lookup_url(address: str, chain_id: str | None) -> str:
    params = {"address": address}
    if chain_id:
        params["chain"] = chain_id
    return f"{reverse('lookups:owners')}?{urlencode(params)}"
