"""The streams host beyond `/history`: streams, their configuration and addresses, status, stats, delivery
logs, the block preview, and the writes (replay a delivery, change a stream's status, re-send a block).

Reads retry like `/history`; so does the block preview, a POST that changes nothing. Writes go through
`UpstreamClient.post_json`, which never re-sends a request whose answer was lost: it raises
`errors.OutcomeUnknown`, and the caller reads the state again (`fetch_stream`, the history record) to learn
whether the provider acted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from dashboard.upstream import errors
from dashboard.upstream.chains import normalize_chain
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.pagination import follow_cursor
from dashboard.upstream.parsing import as_bool, as_datetime, as_dict, as_int, as_str
from dashboard.upstream.records import MalformedRecord, RecordError, parse_items, result_items

StreamKind = Literal["evm", "aptos"]
# What a user may ask for; `error` and `terminated` are the provider's to set.
SettableStatus = Literal["active", "paused"]
SETTABLE_STATUSES = ("active", "paused")
STATUSES = ("active", "paused", "error", "terminated")
DELIVERY_STATUSES = ("failed", "success")

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")


@dataclass(frozen=True)
class StreamConfig:
    """What a stream matches, as the stream listing shows it: the body of a block preview once the stream's
    addresses (`fetch_stream_addresses`) are added. The parts this client does not read (ABI, advanced
    options, triggers, native balances) are kept as sent, so the preview is asked with the stream's own."""

    tag: str | None
    # Event signatures ("Transfer(address,address,uint256)") or topic hashes, as the stream holds them.
    topic0: tuple[str, ...]
    all_addresses: bool
    include_native_txs: bool
    include_contract_logs: bool
    include_internal_txs: bool
    include_all_tx_logs: bool
    abi: Any = field(default=None, repr=False)
    advanced_options: Any = field(default=None, repr=False)
    get_native_balances: Any = field(default=None, repr=False)
    triggers: Any = field(default=None, repr=False)
    # Lower case; empty until added from the stream's address list.
    addresses: tuple[str, ...] = ()

    @classmethod
    def parse(cls, item: dict[str, Any]) -> StreamConfig:
        topics = item.get("topic0")
        return cls(
            tag=as_str(item.get("tag")),
            topic0=tuple(t for t in (as_str(v) for v in (topics if isinstance(topics, list) else [])) if t),
            all_addresses=bool(as_bool(item.get("allAddresses"))),
            include_native_txs=bool(as_bool(item.get("includeNativeTxs"))),
            include_contract_logs=bool(as_bool(item.get("includeContractLogs"))),
            include_internal_txs=bool(as_bool(item.get("includeInternalTxs"))),
            include_all_tx_logs=bool(as_bool(item.get("includeAllTxLogs"))),
            abi=item.get("abi"),
            advanced_options=item.get("advancedOptions"),
            get_native_balances=item.get("getNativeBalances"),
            triggers=item.get("triggers"),
        )

    def with_addresses(self, addresses: Iterable[str]) -> StreamConfig:
        return replace(self, addresses=tuple(a.strip().lower() for a in addresses))

    def as_body(self) -> dict[str, Any]:
        """The block preview's body (contract §5)."""
        return {
            "tag": self.tag or "",
            "topic0": list(self.topic0),
            "abi": self.abi,
            "allAddresses": self.all_addresses,
            "includeNativeTxs": self.include_native_txs,
            "includeContractLogs": self.include_contract_logs,
            "includeInternalTxs": self.include_internal_txs,
            "includeAllTxLogs": self.include_all_tx_logs,
            "advancedOptions": self.advanced_options,
            "getNativeBalances": self.get_native_balances if self.get_native_balances is not None else [],
            "triggers": self.triggers,
            "addresses": list(self.addresses),
        }


@dataclass(frozen=True)
class Stream:
    """A stream's configuration and status. `status` is kept as sent (lower-cased): a status this client
    does not know yet is shown, not dropped."""

    id: str
    kind: StreamKind
    status: str | None
    status_message: str | None
    webhook_url: str | None
    description: str | None
    tag: str | None
    # Hex chain ids ("0x1") for EVM streams; the networks ("mainnet") for Aptos ones.
    chain_ids: tuple[str, ...]
    # Aptos streams say since when they are in error; EVM ones do not.
    error_since: datetime | None
    demo: bool | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def healthy(self) -> bool:
        return self.status == "active"

    @property
    def failing(self) -> bool:
        """In `error` or `terminated`: the provider sends it nothing."""
        return self.status in ("error", "terminated")

    @property
    def config(self) -> StreamConfig:
        """What the stream matches, without its addresses (`fetch_stream_addresses`)."""
        return StreamConfig.parse(self.raw)

    @classmethod
    def parse(cls, item: Any, *, kind: StreamKind = "evm") -> Stream:
        if not isinstance(item, dict):
            raise RecordError(f"expected an object, got {type(item).__name__}")
        stream_id = as_str(item.get("id"))
        if not stream_id:
            raise RecordError("missing id")
        chains = item.get("chainIds") if kind == "evm" else item.get("network")
        if isinstance(chains, str):
            chains = [chains]
        status = as_str(item.get("status"))
        return cls(
            id=stream_id.lower(),
            kind=kind,
            status=status.strip().lower() if status else None,
            status_message=as_str(item.get("statusMessage")),
            webhook_url=as_str(item.get("webhookUrl")),
            description=as_str(item.get("description")),
            tag=as_str(item.get("tag")),
            chain_ids=tuple(
                text.lower()
                for text in (as_str(c) for c in (chains if isinstance(chains, list) else []))
                if text
            ),
            error_since=as_datetime(item.get("isErrorSince")),
            demo=as_bool(item.get("demo")),
            raw=item,
        )


@dataclass
class StreamsPage:
    streams: list[Stream]
    total: int | None
    cursor: str | None
    malformed: list[MalformedRecord] = field(default_factory=list)


@dataclass(frozen=True)
class StatusChange:
    """What the provider answered to a status change: the stream (EVM), or only its status (Aptos)."""

    stream_id: str
    status: str | None
    status_message: str | None
    # The whole stream when the provider sent it.
    stream: Stream | None


@dataclass(frozen=True)
class StreamCounts:
    delivered: int | None
    failed: int | None
    logs_processed: int | None
    txs_processed: int | None
    txs_internal_processed: int | None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> StreamCounts:
        return cls(
            delivered=as_int(data.get("totalWebhooksDelivered")),
            failed=as_int(data.get("totalWebhooksFailed")),
            logs_processed=as_int(data.get("totalLogsProcessed")),
            txs_processed=as_int(data.get("totalTxsProcessed")),
            txs_internal_processed=as_int(data.get("totalTxsInternalProcessed")),
        )

    @property
    def attempts(self) -> int | None:
        if self.delivered is None or self.failed is None:
            return None
        return self.delivered + self.failed


@dataclass(frozen=True)
class StreamStats:
    """Counts the provider keeps since `created_at`, whatever its history window: a cross-check of what was
    stored. `per_stream` is filled by the project form (`/stats`), keyed by stream id."""

    counts: StreamCounts
    created_at: datetime | None
    updated_at: datetime | None
    per_stream: dict[str, StreamCounts]
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class DeliveryLog:
    """One delivery attempt. It names no history id: it matches a record by stream, chain, block number and
    retry count."""

    id: str
    stream_id: str | None
    chain: str | None
    webhook_url: str | None
    tag: str | None
    retries: int | None
    # "failed" or "success", lower-cased as sent.
    delivery_status: str | None
    block_number: int | None
    error_message: str | None
    type: str | None
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def succeeded(self) -> bool:
        return self.delivery_status == "success"

    @classmethod
    def parse(cls, item: Any) -> DeliveryLog:
        if not isinstance(item, dict):
            raise RecordError(f"expected an object, got {type(item).__name__}")
        log_id = as_str(item.get("id"))
        if not log_id:
            raise RecordError("missing id")
        status = as_str(item.get("deliveryStatus"))
        return cls(
            id=log_id,
            stream_id=_lower(as_str(item.get("streamId"))),
            chain=_lower(as_str(item.get("chain"))),
            webhook_url=as_str(item.get("webhookUrl")),
            tag=as_str(item.get("tag")),
            retries=as_int(item.get("retries")),
            delivery_status=status.strip().lower() if status else None,
            block_number=as_int(item.get("blockNumber")),
            error_message=as_str(item.get("errorMessage")),
            type=as_str(item.get("type")),
            created_at=as_datetime(item.get("createdAt")),
            raw=item,
        )


@dataclass
class LogsPage:
    logs: list[DeliveryLog]
    total: int | None
    cursor: str | None
    malformed: list[MalformedRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ReplayedDelivery:
    """The history record as the provider shows it after the replay's attempt. `record` is the record itself,
    to be stored like any `/history` record (it is one)."""

    id: str
    stream_id: str | None
    error_message: str | None
    retries: int | None
    record: dict[str, Any] = field(repr=False)

    @property
    def delivered(self) -> bool:
        """The attempt succeeded (an empty errorMessage)."""
        return self.error_message == ""


@dataclass(frozen=True)
class ResentBlock:
    """The payload the provider built again for one block of one stream and delivered."""

    stream_id: str
    chain_id: str
    block_number: int
    payload: dict[str, Any] = field(repr=False)


@dataclass
class AddressesPage:
    addresses: list[str]
    total: int | None
    cursor: str | None


@dataclass(frozen=True)
class BlockPreview:
    """What a stream configuration would receive for one block (contract §5). `payload` is the webhook body
    as the provider built it, shaped like a history record's payload."""

    chain_id: str
    block_number: int
    block_hash: str | None
    # When the block was mined.
    block_timestamp: datetime | None
    confirmed: bool | None
    logs: int
    txs: int
    txs_internal: int
    payload: dict[str, Any] = field(repr=False)

    @property
    def records(self) -> int:
        """Logs, transactions and internal transactions, counted as a history record's `records` counts them."""
        return self.logs + self.txs + self.txs_internal

    @classmethod
    def parse(cls, data: dict[str, Any], *, chain_id: str, block_number: int) -> BlockPreview:
        block = as_dict(data.get("block")) or {}
        number = as_int(block.get("number"))
        return cls(
            chain_id=(as_str(data.get("chainId")) or chain_id).lower(),
            block_number=number if number is not None else block_number,
            block_hash=as_str(block.get("hash")),
            block_timestamp=as_datetime(block.get("timestamp")),
            confirmed=as_bool(data.get("confirmed")),
            logs=_count(data.get("logs")),
            txs=_count(data.get("txs")),
            txs_internal=_count(data.get("txsInternal")),
            payload=data,
        )


# -- reads ---------------------------------------------------------------------------------------


def fetch_streams_page(
    client: UpstreamClient, *, kind: StreamKind = "evm", limit: int = 100, cursor: str | None = None
) -> StreamsPage:
    _check_kind(kind)
    _check_limit(limit)
    path = f"/streams/{kind}"
    data = client.get_json(path, {"limit": limit, "cursor": cursor or None}, expect_object=True)
    items = _result(client, path, data)
    streams, malformed = parse_items(items, lambda item: Stream.parse(item, kind=kind))
    return StreamsPage(
        streams=streams, total=as_int(data.get("total")), cursor=_cursor(data), malformed=malformed
    )


def iter_streams_pages(
    client: UpstreamClient, *, kind: StreamKind = "evm", limit: int = 100, max_pages: int | None = None
) -> Iterator[StreamsPage]:
    def fetch(page_cursor: str | None) -> StreamsPage:
        return fetch_streams_page(client, kind=kind, limit=limit, cursor=page_cursor)

    return follow_cursor(fetch, max_pages=max_pages)


def fetch_all_streams(client: UpstreamClient, *, kind: StreamKind = "evm") -> list[Stream]:
    """Every stream of the project (a project has at most a few hundred)."""
    return [stream for page in iter_streams_pages(client, kind=kind) for stream in page.streams]


def fetch_stream(client: UpstreamClient, stream_id: str, *, kind: StreamKind = "evm") -> Stream:
    _check_kind(kind)
    stream_id = validate_uuid(stream_id, what="stream id")
    path = f"/streams/{kind}/{stream_id}"
    data = client.get_json(path, expect_object=True)
    try:
        return Stream.parse(data, kind=kind)
    except RecordError as exc:
        raise errors.BadResponse(
            f"{client.base_url}{path} answered with no stream: {exc}", url=client.base_url
        ) from None


def fetch_addresses_page(
    client: UpstreamClient, stream_id: str, *, kind: StreamKind = "evm", limit: int = 100, cursor: str | None = None
) -> AddressesPage:
    """One page of the addresses a stream watches (`GET /streams/{kind}/{id}/address`), lower case."""
    _check_kind(kind)
    _check_limit(limit)
    path = f"/streams/{kind}/{validate_uuid(stream_id, what='stream id')}/address"
    data = client.get_json(path, {"limit": limit, "cursor": cursor or None}, expect_object=True)
    addresses = []
    for item in _result(client, path, data):
        # `{"address": "0x…"}` as published; a bare string is read too.
        text = as_str(item.get("address")) if isinstance(item, dict) else as_str(item)
        if text:
            addresses.append(text.strip().lower())
    return AddressesPage(addresses=addresses, total=as_int(data.get("total")), cursor=_cursor(data))


def fetch_stream_addresses(client: UpstreamClient, stream_id: str, *, kind: StreamKind = "evm") -> list[str]:
    """Every address a stream watches, following cursors."""

    def fetch(page_cursor: str | None) -> AddressesPage:
        return fetch_addresses_page(client, stream_id, kind=kind, cursor=page_cursor)

    return [address for page in follow_cursor(fetch) for address in page.addresses]


def preview_block(
    client: UpstreamClient, chain_id: str | int, block_number: int, config: StreamConfig
) -> BlockPreview | None:
    """What `config` would receive for one block (`POST /streams/evm/{chainId}/block/{blockNumber}`), or None
    when nothing in the block matches it. Sends nothing to any webhook and changes nothing at the provider,
    so it is retried like a read. A malformed block, or one beyond the chain's head, is a BadRequest with the
    provider's message; a 429 beyond the client's retries is RateLimited with its Retry-After."""
    chain_hex = normalize_chain(chain_id)
    _check_block(block_number)
    path = f"/streams/evm/{chain_hex}/block/{block_number}"
    data = client.post_read(path, config.as_body())
    if data is None:
        return None
    if not isinstance(data, dict):
        raise errors.BadResponse(
            f"{client.base_url}{path} answered with neither a payload nor null", status_code=200, url=client.base_url
        )
    return BlockPreview.parse(data, chain_id=chain_hex, block_number=block_number)


def fetch_stats(client: UpstreamClient, stream_id: str | None = None) -> StreamStats:
    """The project's counts (`/stats`), or one stream's (`/stats/{streamId}`)."""
    path = "/stats" if stream_id is None else f"/stats/{validate_uuid(stream_id, what='stream id')}"
    data = client.get_json(path, expect_object=True)
    counts = StreamCounts.parse(data)
    if counts.delivered is None and counts.failed is None:
        # `{}` from a proxy is not "nothing delivered": reading it as zero would fake a cross-check.
        raise errors.BadResponse(
            f"{client.base_url}{path} answered without webhook counts", url=client.base_url
        )
    per_stream: dict[str, StreamCounts] = {}
    for entry in data.get("streams") or []:
        entry_id = as_str(entry.get("streamId")) if isinstance(entry, dict) else None
        if entry_id:
            per_stream[entry_id.lower()] = StreamCounts.parse(entry)
    return StreamStats(
        counts=counts,
        created_at=as_datetime(data.get("createdAt")),
        updated_at=as_datetime(data.get("updatedAt")),
        per_stream=per_stream,
        raw=data,
    )


def fetch_logs_page(
    client: UpstreamClient,
    *,
    limit: int = 100,
    cursor: str | None = None,
    delivery_status: Iterable[str] | None = None,
    stream_id: str | None = None,
) -> LogsPage:
    """One page of delivery logs, newest first. The filters are newer parameters: an older provider ignores
    them, so a caller that filters must still check what comes back."""
    _check_limit(limit)
    statuses = list(delivery_status or [])
    if any(status not in DELIVERY_STATUSES for status in statuses):
        raise errors.InvalidRequest(f"deliveryStatus must be one of {', '.join(DELIVERY_STATUSES)}")
    data = client.get_json(
        "/history/logs",
        {
            "limit": limit,
            "cursor": cursor or None,
            "deliveryStatus": statuses or None,
            "streamId": validate_uuid(stream_id, what="stream id") if stream_id else None,
        },
        expect_object=True,
    )
    items = _result(client, "/history/logs", data)
    logs, malformed = parse_items(items, DeliveryLog.parse)
    return LogsPage(logs=logs, total=as_int(data.get("total")), cursor=_cursor(data), malformed=malformed)


def iter_logs_pages(
    client: UpstreamClient,
    *,
    limit: int = 100,
    delivery_status: Iterable[str] | None = None,
    stream_id: str | None = None,
    max_pages: int | None = None,
) -> Iterator[LogsPage]:
    statuses = list(delivery_status or [])

    def fetch(page_cursor: str | None) -> LogsPage:
        return fetch_logs_page(
            client, limit=limit, cursor=page_cursor, delivery_status=statuses, stream_id=stream_id
        )

    return follow_cursor(fetch, max_pages=max_pages)


def logs_of_block(
    client: UpstreamClient,
    *,
    stream_id: str,
    block_number: int,
    chain: str | None,
    not_before: datetime | None,
    max_pages: int = 5,
) -> list[DeliveryLog]:
    """The delivery attempts logged for one block of one stream, newest first.

    Logs name no history id: they match by stream, chain and block (the two deliveries of a block, unconfirmed
    and confirmed, share these; the retry count and time tell them apart). Logs come newest first, so the read
    stops at the first log older than `not_before`, or after `max_pages` pages."""
    found: list[DeliveryLog] = []
    stream_id = stream_id.lower()
    chain = chain.lower() if chain else None
    for page in iter_logs_pages(client, stream_id=stream_id, max_pages=max_pages):
        for entry in page.logs:
            if not_before is not None and entry.created_at is not None and entry.created_at < not_before:
                return found
            if entry.stream_id != stream_id or entry.block_number != block_number:
                continue
            if chain and entry.chain and entry.chain != chain:
                continue
            found.append(entry)
    return found


# -- writes --------------------------------------------------------------------------------------


def replay_delivery(client: UpstreamClient, stream_id: str, history_id: str) -> ReplayedDelivery:
    """One new attempt of a delivery, now. Raises OutcomeUnknown when the answer was lost: read the history
    record again (its errorMessage) rather than replaying once more."""
    stream_id = validate_uuid(stream_id, what="stream id")
    history_id = validate_uuid(history_id, what="history id")
    path = f"/history/replay/{stream_id}/{history_id}"
    data = client.post_json(path)
    record_id = as_str(data.get("id"))
    if not record_id:
        # The provider accepted the replay (200); only its account of the result is missing.
        raise errors.OutcomeUnknown(
            f"POST {client.base_url}{path} answered 200 without the history record; read it again",
            status_code=200,
            url=client.base_url,
        )
    tiny = as_dict(data.get("tinyPayload")) or {}
    return ReplayedDelivery(
        id=record_id,
        stream_id=_lower(as_str(data.get("streamId"))),
        error_message=as_str(data.get("errorMessage")),
        retries=as_int(tiny.get("retries")),
        record=data,
    )


def set_stream_status(
    client: UpstreamClient, stream_id: str, status: SettableStatus, *, kind: StreamKind = "evm"
) -> StatusChange:
    """Pause a stream or make it active again (how one leaves `error` once the receiver is fixed).

    Raises OutcomeUnknown when the answer was lost: fetch the stream to see its status."""
    _check_kind(kind)
    stream_id = validate_uuid(stream_id, what="stream id")
    if status not in SETTABLE_STATUSES:
        raise errors.InvalidRequest(
            f"a stream's status can be set to active or paused, not {str(status)[:20]!r}"
        )
    data = client.post_json(f"/streams/{kind}/{stream_id}/status", {"status": status})
    stream: Stream | None
    try:
        stream = Stream.parse(data, kind=kind)
    except RecordError:
        # Aptos answers only {status, statusMessage}.
        stream = None
    answered = as_str(data.get("status"))
    return StatusChange(
        stream_id=stream_id,
        status=answered.strip().lower() if answered else None,
        status_message=as_str(data.get("statusMessage")),
        stream=stream,
    )


def resend_block(client: UpstreamClient, stream_id: str, chain_id: str, block_number: int) -> ResentBlock:
    """Have the provider build one block's payload for a stream again and deliver it. Raises OutcomeUnknown
    when the answer was lost: look for the delivery in /history rather than asking again."""
    stream_id = validate_uuid(stream_id, what="stream id")
    chain_hex = normalize_chain(chain_id)
    _check_block(block_number)
    data = client.post_json(f"/streams/evm/{chain_hex}/block-to-webhook/{block_number}/{stream_id}")
    return ResentBlock(stream_id=stream_id, chain_id=chain_hex, block_number=block_number, payload=data)


# -- helpers -------------------------------------------------------------------------------------


def validate_uuid(value: str, *, what: str) -> str:
    """A UUID as the provider writes it (lower case); InvalidRequest for anything else, so that no odd text
    ever becomes part of a request path."""
    if not isinstance(value, str) or not _UUID.match(value.strip()):
        raise errors.InvalidRequest(f"{what} must be a UUID, got {str(value)[:40]!r}")
    return value.strip().lower()


def _check_block(block_number: int) -> None:
    if isinstance(block_number, bool) or not isinstance(block_number, int) or block_number < 0:
        raise errors.InvalidRequest(f"block number must be a whole number, got {block_number!r}")


def _count(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def _check_kind(kind: str) -> None:
    if kind not in ("evm", "aptos"):
        raise errors.InvalidRequest(f"stream kind must be 'evm' or 'aptos', got {str(kind)[:20]!r}")


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise errors.InvalidRequest(f"limit must be between 1 and 100, got {limit!r}")


def _result(client: UpstreamClient, path: str, data: dict[str, Any]) -> list[Any]:
    # As for /history: a 200 without `result` is no page, and reading it as an empty one would end a walk early.
    items = result_items(data.get("result")) if "result" in data else None
    if items is None:
        raise errors.BadResponse(
            f"{client.base_url}{path} answered without a result list", url=client.base_url
        )
    return items


def _cursor(data: dict[str, Any]) -> str | None:
    cursor = as_str(data.get("cursor"))
    return cursor if cursor and cursor != "null" else None


def _lower(value: str | None) -> str | None:
    return value.lower() if value is not None else None
