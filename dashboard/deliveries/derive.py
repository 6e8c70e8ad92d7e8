"""What the dashboard derives from one upstream history record: status, error template, search keys."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from dashboard.deliveries.models import DeliveryStatus
from dashboard.deliveries.schedule import MAX_RETRIES


def delivery_status(error_message: str, retries: int) -> str:
    """Delivered when the latest attempt succeeded; failed once the retry schedule is used up."""
    if not error_message:
        return DeliveryStatus.DELIVERED
    if retries >= MAX_RETRIES:
        return DeliveryStatus.FAILED
    return DeliveryStatus.RETRYING


# Order matters: URLs before hosts, ids and addresses before bare hex, IPs and hosts before bare numbers.
_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.I), "<url>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b0x[0-9a-f]{40}\b", re.I), "<address>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    # IPv6 (with at least two colons and a hex digit, optionally bracketed with a port) before IPv4.
    (re.compile(r"\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d+)?", re.I), "<ip>"),
    (re.compile(r"(?<![\w:])(?=[0-9a-f:]*[0-9a-f])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])", re.I), "<ip>"),
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])"), "<ip>"),
    (re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}(?::\d{1,5})?\b", re.I), "<host>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b", re.I), "<duration>"),
    (re.compile(r"\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b", re.I), "<hex>"),
    # HTTP status codes stay: a 404 and a 500 are different failures, not one with a variable part.
    (re.compile(r"(?<!status code )(?<!status )(?<!HTTP )\b\d+(?:\.\d+)?\b"), "<n>"),
]


@lru_cache(maxsize=8192)
def error_template(message: str) -> str:
    """The message with its variable parts masked, so equal failures group together."""
    text = " ".join(message.split())
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text[:1000]


def error_fingerprint(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()


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
    for log in _dicts(payload.get("logs")):
        _add(keys, "tx", log.get("transactionHash"), _HEX32)
        _add(keys, "addr", log.get("address"), _ADDRESS)
        for n in range(4):
            _add(keys, "topic", log.get(f"topic{n}"), _HEX32)
        _trigger_keys(keys, log.get("triggers"))
    for tx in _dicts(payload.get("txs")):
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
