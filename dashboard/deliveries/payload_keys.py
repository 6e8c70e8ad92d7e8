"""The search keys of a delivery: every hash, address and topic its payload carries, lower-cased and
prefixed by kind ("tx:0x…", "addr:0x…", "topic:0x…", "block:123", "event:transfer"), so searches use a
GIN index and never read payloads. Extracted once, when a record is stored.

Logs and transaction inputs are also decoded with the payload's own ABI (`decoding.py`): each decoded
event adds its name ("event:<name>", lower-cased like every key) and every address among its arguments,
as does every decoded call, so a `Transfer`'s `to` is found by address search."""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any

from dashboard.deliveries.decoding import input_addresses, log_addresses, read_abi

_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def search_keys(payload: dict[str, Any] | None, block_number: int | None) -> list[str]:
    """Kind-prefixed, lower-cased keys for every hash, address and topic in the payload."""
    keys: set[str] = set()
    if block_number is not None:
        keys.add(f"block:{block_number}")
    if not isinstance(payload, dict):
        return sorted(keys)
    # Candidate values are gathered per kind, then checked and added in one pass each.
    hashes: list[Any] = []
    addrs: list[Any] = []
    topics: list[Any] = []
    abi = read_abi(payload.get("abi"))
    for log in _dicts(payload.get("logs")):
        if abi.events:
            event = log_addresses(abi, log)
            if event is not None:
                decoded_event, found = event
                keys.add(f"event:{decoded_event.name.lower()}")
                keys.update(f"addr:{address}" for address in found)
        hashes.append(log.get("transactionHash"))
        addrs.append(log.get("address"))
        topics += (log.get("topic0"), log.get("topic1"), log.get("topic2"), log.get("topic3"))
        _trigger_values(addrs, log.get("triggers"))
    for tx in _dicts(payload.get("txs")):
        if abi.functions:
            call = input_addresses(abi, tx.get("input"))
            if call is not None:
                _call, found = call
                keys.update(f"addr:{address}" for address in found)
        hashes.append(tx.get("hash"))
        addrs += (tx.get("fromAddress"), tx.get("toAddress"), tx.get("receiptContractAddress"))
        _trigger_values(addrs, tx.get("triggers"))
    for itx in _dicts(payload.get("txsInternal")):
        hashes.append(itx.get("transactionHash"))
        addrs += (itx.get("from"), itx.get("to"))
    for name in ("erc20Transfers", "erc20Approvals", "nftTransfers", "nftApprovals", "nativeBalances"):
        for item in _dicts(payload.get(name)):
            hashes.append(item.get("transactionHash"))
            addrs.extend(item.get(field) for field in _TRANSFER_ADDRESS_FIELDS)
            _trigger_values(addrs, item.get("triggers"))
    # A payload repeats its values (one transaction hash in every log, transfer and internal call): each
    # distinct text is checked once.
    keys.update(f"tx:{v.lower()}" for v in _texts(hashes) if _HEX32.match(v))
    keys.update(f"addr:{v.lower()}" for v in _texts(addrs) if _ADDRESS.match(v))
    keys.update(f"topic:{v.lower()}" for v in _texts(topics) if _HEX32.match(v))
    return sorted(keys)


def _texts(values: list[Any]) -> set[str]:
    return {v for v in values if isinstance(v, str)}


EVENT_PREFIX = "event:"
# A string after every "event:…" key and before any later key: ";" follows ":" in code point order.
EVENT_END = "event;"


def event_names(keys: list[str]) -> tuple[str, ...]:
    """The decoded event names among `keys` as `search_keys` returns them (sorted: the "event:" keys lie
    together, found by bisection rather than by reading every key)."""
    start = bisect_left(keys, EVENT_PREFIX)
    end = bisect_left(keys, EVENT_END, start)
    return tuple(key[len(EVENT_PREFIX):] for key in keys[start:end])


# Event names are kept in lower case (search keys match any case); the common events are shown as their
# contracts spell them (ERC-20, -721 and -1155, ownership and roles, the usual DEX and staking events).
WELL_KNOWN_EVENTS = {
    name.lower(): name
    for name in (
        "Transfer", "Approval", "ApprovalForAll", "TransferSingle", "TransferBatch", "URI", "OwnershipTransferred",
        "RoleGranted", "RoleRevoked", "RoleAdminChanged", "Paused", "Unpaused", "Upgraded", "AdminChanged",
        "BeaconUpgraded", "Initialized", "Swap", "Sync", "Mint", "Burn", "Deposit", "Withdrawal", "PairCreated",
        "PoolCreated", "Initialize", "Collect", "IncreaseLiquidity", "DecreaseLiquidity", "Flash", "Staked",
        "Withdrawn", "RewardPaid", "RewardAdded", "OrderFulfilled", "OrdersMatched", "DelegateChanged",
        "DelegateVotesChanged", "Claimed", "Transferred", "Received", "Executed",
    )
}


def event_label(name: str) -> str:
    """A stored (lower-case) event name as shown: `transfer` is `Transfer`; a name not known here as stored."""
    return WELL_KNOWN_EVENTS.get(name, name)


_TRANSFER_ADDRESS_FIELDS = ("contract", "from", "to", "owner", "spender", "operator", "approvedAll", "address")


def _trigger_values(addrs: list[Any], triggers: Any) -> None:
    if isinstance(triggers, list):
        addrs.extend(trigger.get("value") for trigger in triggers if isinstance(trigger, dict))


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
