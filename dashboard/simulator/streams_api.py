"""The streams host beyond /history: streams, their addresses and status, stats, delivery logs, replays, block
re-sends and the block preview.

Answers come from `world.streams` (statuses, counts) and `world.history` (records, attempts), so what one
operation says agrees with what the others say at the same clock time.
"""

from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING

import orjson

from dashboard.simulator import app, catalog, configs, entropy, preview
from dashboard.simulator.cursors import InvalidCursor
from dashboard.simulator.history import Attempt, iso
from dashboard.simulator.responses import Response, error, ok

if TYPE_CHECKING:
    from dashboard.simulator.history import Delivery, Stream
    from dashboard.simulator.world import World

_SEGMENT = r"([^/]*)"
ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("logs", re.compile(r"^/history/logs/?\Z")),
    ("replay", re.compile(rf"^/history/replay/{_SEGMENT}/{_SEGMENT}/?\Z")),
    ("stats", re.compile(r"^/stats/?\Z")),
    ("stream_stats", re.compile(rf"^/stats/{_SEGMENT}/?\Z")),
    ("streams", re.compile(r"^/streams/(evm|aptos)/?\Z")),
    ("stream", re.compile(rf"^/streams/(evm|aptos)/{_SEGMENT}/?\Z")),
    ("stream_status", re.compile(rf"^/streams/(evm|aptos)/{_SEGMENT}/status/?\Z")),
    ("resend_block", re.compile(rf"^/streams/evm/{_SEGMENT}/block-to-webhook/{_SEGMENT}/{_SEGMENT}/?\Z")),
    ("block_preview", re.compile(rf"^/streams/evm/{_SEGMENT}/block/{_SEGMENT}/?\Z")),
    ("stream_addresses", re.compile(rf"^/streams/(evm|aptos)/{_SEGMENT}/address/?\Z")),
    # The simulator's own control, not the provider's: the receivers that are down come back now.
    ("receivers_up", re.compile(r"^/simulator/receivers/up/?\Z")),
)
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
STREAM_NOT_FOUND = "Stream not found"
HISTORY_NOT_FOUND = "History not found"
STATUSES = ("active", "paused", "error", "terminated")


def route_of(path: str) -> str | None:
    for name, pattern in ROUTES:
        if pattern.match(path):
            return name
    return None


def handle(world: World, request: app.Request, route: str) -> Response:
    found = dict(ROUTES)[route].match(request.path)
    assert found is not None
    parts = found.groups()
    if route == "logs":
        return logs(world, request)
    if route == "replay":
        return replay(world, parts[0], parts[1])
    if route == "stats":
        return stats(world)
    if route == "stream_stats":
        return stream_stats(world, parts[0])
    if route == "streams":
        return streams(world, request, parts[0])
    if route == "stream":
        return stream(world, parts[0], parts[1])
    if route == "stream_status":
        return stream_status(world, request, parts[0], parts[1])
    if route == "receivers_up":
        return receivers_up(world, request)
    if route == "block_preview":
        return block_preview(world, request, parts[0], parts[1])
    if route == "stream_addresses":
        return stream_addresses(world, request, parts[0], parts[1])
    return resend_block(world, parts[0], parts[1], parts[2])


def _uuid(name: str, raw: str) -> str:
    if not UUID.match(raw):
        raise app.BadParams([f"{name} must be a valid UUID"])
    return raw.lower()


def _stream(world: World, raw: str, name: str = "id") -> Stream | None:
    return world.streams.stream(_uuid(name, raw))


def streams(world: World, request: app.Request, kind: str) -> Response:
    limit = app.parse_int("limit", request.one("limit"), low=1, high=100)
    if kind == "aptos":
        # The simulated project streams EVM chains only.
        return ok({"result": [], "total": 0})
    offset = 0
    raw_cursor = request.one("cursor")
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="streams")
            limit, offset = int(claims["limit"]), int(claims["offset"])
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise app.BadParams(["Invalid cursor"]) from None
    now = world.clock.timestamp()
    every = world.history.streams
    body: dict[str, object] = {
        "result": [world.streams.render(s, now) for s in every[offset : offset + limit]],
        "total": len(every),
    }
    if offset + limit < len(every):
        body["cursor"] = world.cursors.encode(
            {"kind": "streams", "limit": limit, "offset": offset + limit, "iat": int(now)}
        )
    return ok(body)


def stream(world: World, kind: str, raw_id: str) -> Response:
    found = _stream(world, raw_id)
    if found is None or kind != "evm":
        return error(404, STREAM_NOT_FOUND, nest=False)
    return ok(world.streams.render(found, world.clock.timestamp()))


def stream_status(world: World, request: app.Request, kind: str, raw_id: str) -> Response:
    found = _stream(world, raw_id)
    try:
        body = orjson.loads(request.body) if request.body else None
    except orjson.JSONDecodeError:
        raise app.BadParams(["Invalid JSON body"]) from None
    status = body.get("status") if isinstance(body, dict) else None
    if status not in STATUSES:
        raise app.BadParams([f"status must be one of the following values: {', '.join(STATUSES)}"])
    if status not in ("active", "paused"):
        raise app.BadParams([f"Status {status} can only be set by the system"])
    if found is None or kind != "evm":
        return error(404, STREAM_NOT_FOUND, nest=False)
    now = world.clock.timestamp()
    refused = world.streams.set_status(found, status, now)
    if refused is not None:
        return error(400, refused, nest=False)
    return ok(world.streams.render(found, now))


def receivers_up(world: World, request: app.Request) -> Response:
    """`POST /simulator/receivers/up` (body `{"streamId": ...}` optional): the scripted outages under way end
    now, on that stream's webhook URL or on all; answers the ones it ended."""
    try:
        body = orjson.loads(request.body) if request.body else None
    except orjson.JSONDecodeError:
        raise app.BadParams(["Invalid JSON body"]) from None
    raw = body.get("streamId") if isinstance(body, dict) else None
    found = None
    if raw is not None:
        found = _stream(world, str(raw), "streamId")
        if found is None:
            return error(404, STREAM_NOT_FOUND, nest=False)
    now = world.clock.timestamp()
    ended = world.streams.receivers_up(now, found)
    return ok(
        {
            "receivers": [
                {"webhookUrl": i.url, "kind": i.kind, "downSince": iso(i.start), "upAt": iso(now)} for i in ended
            ]
        }
    )


def stats(world: World) -> Response:
    counts, updated = world.streams.counts(world.clock.timestamp())
    total = type(next(iter(counts.values())))()
    for one in counts.values():
        total.add(one)
    return ok(
        {
            **total.as_json(),
            "streams": [{**counts[s.id].as_json(), "streamId": s.id} for s in world.history.streams],
            "createdAt": iso(world.streams.origin),
            "updatedAt": iso(updated),
        }
    )


def stream_stats(world: World, raw_id: str) -> Response:
    found = _stream(world, raw_id, "streamId")
    if found is None:
        return error(404, STREAM_NOT_FOUND, nest=False)
    counts, updated = world.streams.counts(world.clock.timestamp())
    return ok(
        {**counts[found.id].as_json(), "createdAt": iso(world.streams.origin), "updatedAt": iso(updated)}
    )


def replay(world: World, raw_stream: str, raw_id: str) -> Response:
    stream_id = _uuid("streamId", raw_stream)
    history_id = _uuid("id", raw_id)
    now = world.clock.timestamp()
    delivery = world.history.find(history_id, now)
    if delivery is None or delivery.event.stream.id != stream_id:
        return error(404, HISTORY_NOT_FOUND, nest=False)
    refused = world.streams.replay(delivery.event.stream, delivery, now)
    if refused is not None:
        return error(400, refused, nest=False)
    return ok(world.history.render(delivery, now, include_payload=True))


def _chain_and_block(raw_chain: str, raw_block: str) -> tuple[catalog.Chain, int]:
    chain = catalog.chain_for(raw_chain)
    if chain is None:
        raise app.BadParams(["Invalid chain provided"])
    if not re.fullmatch(r"[0-9]{1,12}", raw_block, flags=re.ASCII):
        raise app.BadParams(["blockNumber must be a positive integer"])
    return chain, int(raw_block)


def _mined(chain: catalog.Chain, number: int, now: float) -> None:
    """DECISION (contract §5): a block beyond the chain's current head is a 400 that says so."""
    head = catalog.block_at(chain, now)
    if number > head:
        raise app.BadParams([f"Block {number} is beyond the current head of chain {chain.hex_id} ({head})"])


def resend_block(world: World, raw_chain: str, raw_block: str, raw_stream: str) -> Response:
    found = _stream(world, raw_stream, "streamId")
    chain, number = _chain_and_block(raw_chain, raw_block)
    if found is None:
        return error(404, STREAM_NOT_FOUND, nest=False)
    if chain.hex_id != found.chain.hex_id:
        raise app.BadParams([f"Chain {chain.hex_id} is not part of the stream"])
    now = world.clock.timestamp()
    _mined(chain, number, now)
    made = world.streams.resend(found, number, now)
    if isinstance(made, str):
        return error(400, made, nest=False)
    record = world.history.render(made, now, include_payload=True)
    return ok(record["payload"])


def block_preview(world: World, request: app.Request, raw_chain: str, raw_block: str) -> Response:
    """`POST /streams/evm/{chainId}/block/{blockNumber}` with a stream configuration: the webhook body it would
    receive for that block, or null (preview.py). Sends nothing, records nothing."""
    chain, number = _chain_and_block(raw_chain, raw_block)
    try:
        body = orjson.loads(request.body) if request.body else {}
        config = preview.parse_config(body)
    except orjson.JSONDecodeError:
        raise app.BadParams(["Invalid JSON body"]) from None
    except preview.InvalidConfig as exc:
        raise app.BadParams([str(exc)]) from None
    now = world.clock.timestamp()
    _mined(chain, number, now)
    return ok(preview.preview(world.history, chain, number, config, now))


def stream_addresses(world: World, request: app.Request, kind: str, raw_id: str) -> Response:
    """`GET /streams/evm/{id}/address?limit=&cursor=`: the addresses the stream watches, `{address}` each."""
    limit = app.parse_int("limit", request.one("limit"), low=1, high=100)
    found = _stream(world, raw_id)
    if found is None or kind != "evm":
        return error(404, STREAM_NOT_FOUND, nest=False)
    offset = 0
    raw_cursor = request.one("cursor")
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="addresses")
            if claims["stream"] != found.id:
                raise InvalidCursor("cursor belongs to another stream")
            limit, offset = int(claims["limit"]), int(claims["offset"])
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise app.BadParams(["Invalid cursor"]) from None
    every = configs.addresses(world.history.seed, found)
    body: dict[str, object] = {
        "result": [{"address": a} for a in every[offset : offset + limit]],
        "total": len(every),
    }
    if offset + limit < len(every):
        body["cursor"] = world.cursors.encode(
            {"kind": "addresses", "stream": found.id, "limit": limit, "offset": offset + limit,
             "iat": int(world.clock.timestamp())}
        )
    return ok(body)


# -- delivery logs -------------------------------------------------------------------------------


def logs(world: World, request: app.Request) -> Response:
    limit = app.parse_int("limit", request.one("limit"), low=1, high=100)
    wanted = set(request.query.get("deliveryStatus", []) + request.query.get("deliveryStatus[]", []))
    if wanted - {"failed", "success"}:
        raise app.BadParams(["deliveryStatus must be one of the following values: failed, success"])
    raw_stream = request.one("streamId")
    stream_id = _uuid("streamId", raw_stream) if raw_stream else None
    before: tuple[float, str, int] | None = None
    raw_cursor = request.one("cursor")
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="logs")
            limit = int(claims["limit"])
            before = (float(claims["at"]), str(claims["id"]), int(claims["order"]))
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise app.BadParams(["Invalid cursor"]) from None
    now = world.clock.timestamp()
    entries = attempt_logs(world, now)
    if stream_id is not None:
        entries = [e for e in entries if e[3].event.stream.id == stream_id]
    if wanted:
        entries = [e for e in entries if ("failed" if e[4].error else "success") in wanted]
    keys = [e[:3] for e in entries]
    hi = len(entries) if before is None else bisect.bisect_left(keys, before)
    start = max(0, hi - limit)
    page = entries[start:hi][::-1]
    body: dict[str, object] = {
        "result": [render_log(world, d, attempt) for _, _, _, d, attempt in page],
        "total": len(entries),
    }
    if start > 0 and page:
        at, delivery_id, order = page[-1][:3]
        body["cursor"] = world.cursors.encode(
            {"kind": "logs", "limit": limit, "at": at, "id": delivery_id, "order": order, "iat": int(now)}
        )
    return ok(body)


LogEntry = tuple[float, str, int, "Delivery", Attempt]


def attempt_logs(world: World, now: float) -> list[LogEntry]:
    """A log for every attempt of every record visible at `now`, oldest first."""
    index, lo, hi = world.history.window(now)
    entries: list[LogEntry] = []
    for d in index.deliveries[lo:hi]:
        for attempt in world.history.attempts_made(d, now):
            entries.append((attempt.at, d.id, attempt.order, d, attempt))
    entries.sort(key=lambda e: e[:3])
    return entries


def render_log(world: World, d: Delivery, attempt: Attempt) -> dict[str, object]:
    stream = d.event.stream
    return {
        "id": entropy.uuid4(entropy.rng(world.history.seed, "log", d.id, attempt.order)),
        "streamId": stream.id,
        "chain": "" if d.test else stream.chain.hex_id,
        "webhookUrl": stream.webhook.url,
        "tag": stream.tag,
        "retries": attempt.retries + (1 if attempt.replay and world.faults.replay_counts_as_retry else 0),
        "deliveryStatus": "failed" if attempt.error else "success",
        "blockNumber": d.event.number,
        "errorMessage": attempt.error,
        "type": "evm",
        "createdAt": iso(attempt.at),
    }
