"""The search keys of a delivery: every hash, address and topic its payload carries, lower-cased and
prefixed by kind ("tx:0x…", "addr:0x…", "topic:0x…", "block:123", "event:transfer"), so searches use a
GIN index and never read payloads. Extracted once, when a record is stored.

Logs and transaction inputs are also decoded with the payload's own ABI (`decoding.py`): each decoded
event adds its name ("event:<name>", lower-cased like every key) and every address among its arguments,
as does every decoded call, so a `Transfer`'s `to` is found by address search."""

from __future__ import annotations

import re
from typing import Any

from dashboard.deliveries.decoding import addresses, decode_input, decode_log, read_abi

_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def _add(keys: set[str], kind: str, value: Any, pattern: re.Pattern[str]) -> None:
    if isinstance(value, str) and pattern.match(value):
        keys.add(f"{kind}:{value.lower()}")


def search_keys(payload: dict[str, Any] | None, block_number: int | None) -> list[str]:
    """Kind-prefixed, lower-cased keys for every hash, address and topic in the payload."""
    keys: set[str] = set()
    if block_number is not None:
        keys.add(f"block:{block_number}")
    if not isinstance(payload, dict):
        return sorted(keys)
    abi = read_abi(payload.get("abi"))
    for log in _dicts(payload.get("logs")):
        if abi.events:
            decoded = decode_log(abi, log)
            if decoded.item is not None:
                keys.add(f"event:{decoded.item.name.lower()}")
                keys.update(f"addr:{address}" for address in addresses(decoded.args))
        _add(keys, "tx", log.get("transactionHash"), _HEX32)
        _add(keys, "addr", log.get("address"), _ADDRESS)
        for n in range(4):
            _add(keys, "topic", log.get(f"topic{n}"), _HEX32)
        _trigger_keys(keys, log.get("triggers"))
    for tx in _dicts(payload.get("txs")):
        if abi.functions:
            call = decode_input(abi, tx.get("input"))
            if call is not None and call.item is not None:
                keys.update(f"addr:{address}" for address in addresses(call.args))
        _add(keys, "tx", tx.get("hash"), _HEX32)
        for field in ("fromAddress", "toAddress", "receiptContractAddress"):
            _add(keys, "addr", tx.get(field), _ADDRESS)
        _trigger_keys(keys, tx.get("triggers"))
    for itx in _dicts(payload.get("txsInternal")):
        _add(keys, "tx", itx.get("transactionHash"), _HEX32)
        _add(keys, "addr", itx.get("from"), _ADDRESS)
        _add(keys, "addr", itx.get("to"), _ADDRESS)
    for name in ("erc20Transfers", "erc20Approvals", "nftTransfers", "nftApprovals", "nativeBalances"):
        for item in _dicts(payload.get(name)):
            _add(keys, "tx", item.get("transactionHash"), _HEX32)
            for field in ("contract", "from", "to", "owner", "spender", "operator", "approvedAll", "address"):
                _add(keys, "addr", item.get(field), _ADDRESS)
            _trigger_keys(keys, item.get("triggers"))
    return sorted(keys)


def _trigger_keys(keys: set[str], triggers: Any) -> None:
    for trigger in _dicts(triggers):
        _add(keys, "addr", trigger.get("value"), _ADDRESS)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
