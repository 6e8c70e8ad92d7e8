"""The block preview (contract §5): the webhook body a stream configuration would receive for one block.

The simulator's chain activity is drawn per stream (history.py): a block holds what each of its streams
matched in it. A posted configuration is matched against that activity, log by log and transaction by
transaction: a log when its topic0 is in the configuration's `topic0` and its address among its `addresses`
(any address with `allAddresses`), a transaction when it carries a matched log or, with `includeNativeTxs`, when
it is from or to one of the addresses, an internal transaction (`includeInternalTxs`) likewise, and the
decoded transfer lists by their logs. So a stream's own configuration (as `GET /streams/evm` and its addresses
show it) gets exactly the body the stream received for the block — or would have received while it was not
`active`, or during an address reload — and a block in which nothing matches (a quiet hour's, say) gets null.

DECISION: the body is the delivery's as §3 shapes it, with `retries` 0, `confirmed` true once the block has
reached its chain's finality at the time of asking, `tag` and `abi` as posted, and `streamId` "" (no stream
is involved). Configuration keys the simulator does not model (`advancedOptions`, `triggers`,
`getNativeBalances`, `includeAllTxLogs`, `includeContractLogs`) are accepted and change nothing; unknown keys
are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eth_utils import event_signature_to_log_topic

from dashboard.simulator import catalog

if TYPE_CHECKING:
    from dashboard.simulator.history import HistoryWorld

ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
TOPIC = re.compile(r"^0x[0-9a-fA-F]{64}\Z")
# The payload's lists of decoded transfers, matched by the log they come from.
LOG_LISTS = ("erc20Transfers", "erc20Approvals", "nftTransfers")


class InvalidConfig(ValueError):
    """The posted body is not a stream configuration; the message says why."""


@dataclass(frozen=True)
class PreviewConfig:
    tag: str
    # topic0 hashes (0x + 64 hex), from the signatures or hashes posted.
    topics: frozenset[str]
    addresses: frozenset[str]
    all_addresses: bool
    include_native_txs: bool
    include_internal_txs: bool
    abi: list[Any]


def parse_config(body: object) -> PreviewConfig:
    if not isinstance(body, dict):
        raise InvalidConfig("The body must be a stream configuration (a JSON object)")
    tag = body.get("tag")
    if tag is not None and not isinstance(tag, str):
        raise InvalidConfig("tag must be a string")
    topics = _strings(body, "topic0")
    raw_addresses = _strings(body, "addresses")
    if any(not ADDRESS.match(a) for a in raw_addresses):
        raise InvalidConfig("each value in addresses must be an address (0x and 40 hex digits)")
    abi = body.get("abi")
    return PreviewConfig(
        tag=tag or "",
        topics=frozenset(_topic(t) for t in topics),
        addresses=frozenset(a.lower() for a in raw_addresses),
        all_addresses=_flag(body, "allAddresses"),
        include_native_txs=_flag(body, "includeNativeTxs"),
        include_internal_txs=_flag(body, "includeInternalTxs"),
        abi=abi if isinstance(abi, list) else [],
    )


def _strings(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise InvalidConfig(f"{key} must be an array of strings")
    return value


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidConfig(f"{key} must be a boolean value")
    return value


def _topic(text: str) -> str:
    """A topic0 as its hash: a signature ("Transfer(address,address,uint256)") is hashed, a hash kept."""
    text = text.strip()
    if TOPIC.match(text):
        return text.lower()
    return "0x" + event_signature_to_log_topic(text.replace(" ", "")).hex()


def preview(
    history: HistoryWorld, chain: catalog.Chain, number: int, config: PreviewConfig, now: float
) -> dict[str, Any] | None:
    """The body `config` would receive for block `number` of `chain`, or None when nothing in it matches."""
    ts = catalog.block_time(chain, number)
    events = {
        d.event.key: d.event
        for d in history.matching_between(ts, ts)
        if d.event.stream.chain.hex_id == chain.hex_id and d.event.number == number
    }
    body: dict[str, Any] | None = None
    for key in sorted(events):
        matched = _matched(history.payload(events[key]), config)
        if matched is None:
            continue
        if body is None:
            body = matched
        else:
            for name in ("logs", "txs", "txsInternal", *LOG_LISTS):
                body[name] = body[name] + matched[name]
    if body is None:
        return None
    final = catalog.block_at(chain, now) - number >= chain.confirmations
    return {**body, "abi": config.abi, "retries": 0, "confirmed": final, "tag": config.tag, "streamId": ""}


def _matched(payload: dict[str, Any], config: PreviewConfig) -> dict[str, Any] | None:
    """What of one stream's payload for the block `config` matches; None when nothing does."""

    def watched(address: object) -> bool:
        return isinstance(address, str) and address.lower() in config.addresses

    logs = [
        log
        for log in payload["logs"]
        if log.get("topic0") in config.topics and (config.all_addresses or watched(log.get("address")))
    ]
    hashes = {log["transactionHash"] for log in logs}
    txs = [
        tx
        for tx in payload["txs"]
        if tx["hash"] in hashes
        or (config.include_native_txs and (watched(tx.get("fromAddress")) or watched(tx.get("toAddress"))))
    ]
    internal = [
        item
        for item in payload["txsInternal"]
        if config.include_internal_txs and (watched(item.get("from")) or watched(item.get("to")))
    ]
    if not (logs or txs or internal):
        return None
    kept = {(log["transactionHash"], log["logIndex"]) for log in logs}
    lists = {
        name: [item for item in payload.get(name, []) if (item["transactionHash"], item["logIndex"]) in kept]
        for name in LOG_LISTS
    }
    return {**payload, "logs": logs, "txs": txs, "txsInternal": internal, **lists}
