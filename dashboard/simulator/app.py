"""Request handling: routing, auth, parameter validation and the three operations' answers.

Transport-free: `handle()` takes the parts of a request and returns a Response, so the HTTP server
stays a thin shell and every rule here can be read in one place.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote

from dashboard.simulator import catalog, media, responses, streams_api
from dashboard.simulator.cursors import InvalidCursor
from dashboard.simulator.owners import render_owner
from dashboard.simulator.responses import Response, error, ok
from dashboard.simulator.world import World

MAX_QUERY_FIELDS = 200
OWNERS_PATH = re.compile(r"^/api/v2/nft/([^/]*)/owners/?\Z")
CREATORS_PATH = re.compile(r"^/aptos/(mainnet|testnet)/nfts/creators/?\Z")


class BadParams(Exception):
    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Mapping[str, str]
    # The address the server listens on, for when the request has no usable Host header.
    server_url: str = ""
    body: bytes = b""

    def one(self, name: str) -> str | None:
        """A single-valued parameter; a repeated one is a client error, as Express parsers make it a list."""
        values = self.query.get(name)
        if not values:
            return None
        if len(values) > 1:
            raise BadParams([f"{name} must be a single value"])
        return values[0]


def parse_query(raw: str) -> dict[str, list[str]]:
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, errors="strict", max_num_fields=MAX_QUERY_FIELDS)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadParams(["query string could not be parsed"]) from exc
    query: dict[str, list[str]] = {}
    for key, value in pairs:
        query.setdefault(key, []).append(value)
    return query


def is_nest(path: str) -> bool:
    return path.startswith("/aptos/")


def check_key(world: World, request: Request) -> Response | None:
    """401 unless the configured key came in X-API-Key (or, on the Aptos host, as a bearer token)."""
    nest = is_nest(request.path)
    # Whitespace around a header value is not part of it (RFC 9110), as Node's parser sees it.
    key = request.headers.get("x-api-key", "").strip()
    if not key and nest:
        auth = request.headers.get("authorization", "").strip()
        if auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
    if not key:
        return error(401, responses.MISSING_KEY, nest=nest)
    if not hmac.compare_digest(key.encode("utf-8", "replace"), world.api_key.encode()):
        return error(401, responses.INVALID_KEY, nest=nest)
    return None


def is_media(path: str) -> bool:
    return path.startswith(media.PREFIX)


HOST_HEADER = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?\Z")


def public_base_url(world: World, request: Request) -> str:
    """Where clients reach this simulator: the configured public URL, else the URL the request came in on."""
    if world.config.public_url:
        return world.config.public_url.rstrip("/")
    host = request.headers.get("host", "")
    if HOST_HEADER.match(host):
        return f"http://{host}"
    return request.server_url


def route_of(path: str) -> str | None:
    if path.rstrip("/") == "/history":
        return "history"
    if OWNERS_PATH.match(path):
        return "owners"
    if CREATORS_PATH.match(path):
        return "creators"
    if media.PATH.match(path):
        return "media"
    return streams_api.route_of(path)


# The methods each route answers; any other is a 405 naming them. The block preview is a POST (its body is a
# stream configuration) that changes nothing.
WRITE_ROUTES = frozenset({"replay", "stream_status", "resend_block", "receivers_up", "block_preview"})


def handle(world: World, request: Request) -> Response:
    nest = is_nest(request.path)
    route = route_of(request.path)
    if route is None:
        # Any method: an unknown path is a 404, as Express answers it.
        return error(404, f"Cannot {request.method} {request.path}"[:200], nest=nest)
    allowed = ("POST",) if route in WRITE_ROUTES else ("GET", "HEAD")
    if request.method not in allowed:
        response = error(405, f"Cannot {request.method} {request.path}"[:200], nest=nest)
        response.headers["Allow"] = ", ".join(allowed)
        return response
    if route == "media":
        return media_file(world, request)
    denied = check_key(world, request)
    if denied is not None:
        return denied
    try:
        if route == "history":
            return history(world, request)
        if route == "owners":
            return owners(world, request)
        if route == "creators":
            return creators(world, request)
        return streams_api.handle(world, request, route)
    except BadParams as exc:
        return error(400, exc.messages if nest else exc.messages[0], nest=nest)


def media_file(world: World, request: Request) -> Response:
    """A thumbnail from the media CDN: no key; 404 for a size, format or token it does not have."""
    found = media.PATH.match(request.path)
    token_id = world.owners.media_token_id(found.group(1)) if found else None
    if found is None or token_id is None:
        return error(404, f"Cannot GET {request.path}"[:200], nest=False)
    return media.answer(found.group(1), found.group(2), token_id)


def parse_int(name: str, raw: str | None, *, low: int, high: int, default: int | None = None) -> int:
    if raw is None or raw == "":
        if default is None:
            raise BadParams([f"{name} is required"])
        return default
    # ASCII digits only: `\d` and int() would also take other scripts' digits ("５").
    found = re.fullmatch(r"\s*([+-]?)([0-9]+)\s*", raw, flags=re.ASCII)
    if found is None:
        raise BadParams([f"{name} must be an integer number"])
    digits = found.group(2).lstrip("0") or "0"
    # Compared by length first, so that a thousand-digit number costs nothing and still reads as too big.
    value = int(digits) if len(digits) <= 12 else 10**12
    if found.group(1) == "-":
        value = -value
    if value < low:
        raise BadParams([f"{name} must not be less than {low}"])
    if value > high:
        raise BadParams([f"{name} must not be greater than {high}"])
    return value


def parse_bool(name: str, raw: str | None, *, default: bool) -> bool:
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise BadParams([f"{name} must be a boolean value (true or false)"])


def history(world: World, request: Request) -> Response:
    limit = parse_int("limit", request.one("limit"), low=1, high=100)
    exclude_payload = parse_bool("excludePayload", request.one("excludePayload"), default=False)
    raw_cursor = request.one("cursor")
    before: tuple[float, str] | None = None
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="history")
            limit = int(claims["limit"])
            before = (float(claims["date"]), str(claims["id"]))
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise BadParams(["Invalid cursor"]) from None
    now = world.clock.timestamp()
    page, total, more = world.history.page(now, limit, before)
    body: dict[str, object] = {
        "result": [world.history.render(d, now, include_payload=not exclude_payload) for d in page],
        "total": total,
    }
    if more and page:
        last = page[-1]
        body["cursor"] = world.cursors.encode(
            {"kind": "history", "limit": limit, "date": last.date, "id": last.id, "iat": int(now)}
        )
    return ok(body)


EVM_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
APTOS_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{64}\Z")


def owners(world: World, request: Request) -> Response:
    match = OWNERS_PATH.match(request.path)
    assert match is not None
    try:
        # Route parameters arrive percent-decoded, as Express hands them over.
        address = unquote(match.group(1), errors="strict")
    except UnicodeDecodeError:
        raise BadParams(["Invalid address provided"]) from None
    if not EVM_ADDRESS.match(address):
        raise BadParams(["Invalid address provided"])
    chain = catalog.chain_for(request.one("chain") or "eth")
    if chain is None:
        raise BadParams(["Invalid chain provided"])
    fmt = (request.one("format") or "decimal").lower()
    if fmt not in ("decimal", "hex"):
        raise BadParams(["format must be one of the following values: decimal, hex"])
    limit = parse_int("limit", request.one("limit"), low=1, high=100, default=100)
    disable_total = parse_bool("disable_total", request.one("disable_total"), default=True)
    normalize = parse_bool("normalizeMetadata", request.one("normalizeMetadata"), default=False)
    with_media = parse_bool("media_items", request.one("media_items"), default=False)
    media_base_url = public_base_url(world, request)
    address = address.lower()
    offset, page = 0, 1
    raw_cursor = request.one("cursor")
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="owners")
            if claims["address"] != address or claims["chain"] != chain.hex_id:
                raise InvalidCursor("cursor belongs to another contract")
            limit, offset, page = int(claims["limit"]), int(claims["offset"]), int(claims["page"])
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise BadParams(["Invalid cursor"]) from None
    now = world.clock.timestamp()
    contract = world.owners.contract(chain, address)
    status, share = world.owners.sync_state(contract, now)
    visible = contract.tokens[: int(len(contract.tokens) * share)]
    chunk = visible[offset : offset + limit]
    more = offset + limit < len(visible)
    cursor = None
    if more:
        cursor = world.cursors.encode(
            {
                "kind": "owners",
                "address": address,
                "chain": chain.hex_id,
                "limit": limit,
                "offset": offset + limit,
                "page": page + 1,
                "iat": int(now),
            }
        )
    return ok(
        {
            "status": status,
            "total": None if disable_total else len(visible),
            "page": page,
            "page_size": limit,
            "cursor": cursor,
            "result": [
                render_owner(
                    contract,
                    t,
                    hex_ids=fmt == "hex",
                    normalize=normalize,
                    media=with_media,
                    media_base_url=media_base_url,
                )
                for t in chunk
            ],
        }
    )


CREATOR_KEY = re.compile(r"^creator_addresses(?:\[([0-9]{0,4})\])?\Z")


def creator_addresses(request: Request) -> list[str]:
    """All three encodings: repeated key, `key[]=`, and `key[0]=`/`key[1]=` (in index order)."""
    plain: list[str] = []
    indexed: list[tuple[int, int, str]] = []
    for key, values in request.query.items():
        found = CREATOR_KEY.match(key)
        if found is None:
            continue
        if found.group(1):
            indexed.extend((int(found.group(1)), n, v) for n, v in enumerate(values))
        else:
            plain.extend(values)
    return plain + [v for _, _, v in sorted(indexed)]


def creators(world: World, request: Request) -> Response:
    match = CREATORS_PATH.match(request.path)
    assert match is not None
    network = match.group(1)
    problems: list[str] = []
    limit = offset = 0
    try:
        limit = parse_int("limit", request.one("limit"), low=1, high=100)
    except BadParams as exc:
        problems.extend(exc.messages)
    try:
        offset = parse_int("offset", request.one("offset"), low=0, high=100, default=0)
    except BadParams as exc:
        problems.extend(exc.messages)
    addresses = creator_addresses(request)
    if not addresses:
        problems.append("creator_addresses must contain at least 1 elements")
    elif len(addresses) > 25:
        problems.append("creator_addresses must contain no more than 25 elements")
    if any(not APTOS_ADDRESS.match(a) for a in addresses):
        problems.append("each value in creator_addresses must match /^0x[a-fA-F0-9]{64}$/ regular expression")
    if problems:
        raise BadParams(problems)
    addresses = [a.lower() for a in addresses]
    fingerprint = ",".join(sorted(set(addresses)))
    raw_cursor = request.one("cursor")
    position = offset
    if raw_cursor:
        try:
            claims = world.cursors.decode(raw_cursor, kind="creators")
            if claims["network"] != network or claims["creators"] != fingerprint:
                raise InvalidCursor("cursor belongs to another query")
            limit, position = int(claims["limit"]), int(claims["position"])
        except (InvalidCursor, KeyError, TypeError, ValueError):
            raise BadParams(["cursor is not valid"]) from None
    items = world.creators[network].tokens_for(addresses)
    chunk = items[position : position + limit]
    more = position + limit < len(items)
    cursor = None
    if more:
        cursor = world.cursors.encode(
            {
                "kind": "creators",
                "network": network,
                "creators": fingerprint,
                "limit": limit,
                "position": position + limit,
                "iat": int(world.clock.timestamp()),
            }
        )
    return ok({"cursor": cursor, "hasNextPage": more, "result": chunk})
