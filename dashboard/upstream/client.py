"""The transport shared by every upstream operation: auth headers, timeouts, retries, error mapping."""

from __future__ import annotations

import base64
import functools
import logging
import math
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from dashboard.upstream import errors, metrics

log = logging.getLogger(__name__)

QueryParams = Mapping[str, str | int | bool | Sequence[str] | None]

# Visible ASCII and spaces: what an HTTP header value can carry.
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")

# Statuses the provider's own SDK retries on.
RETRYABLE_STATUSES = frozenset({408, 413, 429, 500, 502, 503, 504})

# A Retry-After beyond a week is not a plan anyone keeps; larger values are read as "not said".
MAX_RETRY_AFTER_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class ClientSettings:
    # Kept out of repr so that a logged or printed settings object never shows it.
    api_key: str = field(repr=False)
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    # The longest Retry-After the client sleeps through itself; longer waits are raised to the caller.
    max_retry_after: float = 30.0
    # One attempt may not take longer than this in all, however slowly a server trickles bytes.
    total_timeout: float = 120.0
    # Larger bodies are refused rather than read into memory.
    max_body_bytes: int = 64 * 1024 * 1024
    # The `source` label of this client's request metrics (the source's name).
    metrics_source: str = ""


class UpstreamClient:
    """JSON over HTTP with one upstream host. One instance per base URL; reuse it for connection pooling.

    Reads (`get_json`) are retried on every transient failure. Writes (`post_json`) are retried only when
    the provider certainly did not act: the connection was never made, or it answered 429 (refused).
    """

    def __init__(
        self,
        base_url: str,
        settings: ClientSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self._sleep = sleep
        if not _HEADER_SAFE.fullmatch(settings.api_key):
            # httpx would otherwise raise with the header value, i.e. the key, in its message.
            raise errors.InvalidRequest(
                "the API key contains characters that cannot be sent in an HTTP header"
            )
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"X-API-Key": settings.api_key, "Accept": "application/json"},
            timeout=httpx.Timeout(
                settings.read_timeout, connect=settings.connect_timeout, pool=settings.connect_timeout
            ),
            transport=transport,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> UpstreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_json(self, path: str, params: QueryParams | None = None, *, expect_object: bool = False) -> Any:
        """GET `path` and return the decoded JSON body, retrying transient failures with backoff.

        With `expect_object`, a 200 whose body is not a JSON object counts as a bad (transient) response.
        """
        query = _encode_params(params or {})

        def once() -> Any:
            data = self._read_once("GET", path, query)
            if expect_object and not isinstance(data, dict):
                raise errors.BadResponse(
                    f"{self.base_url}{path} answered 200 with JSON that is not an object",
                    status_code=200,
                    url=f"{self.base_url}{path}",
                )
            return data

        return self._retrying(once, path)

    def post_read(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST `body` to an operation that changes nothing at the provider (the block preview) and return its
        decoded JSON answer, which may be null. Unlike a write, it is safe to send again: transient failures are
        retried like a GET's."""
        content = orjson.dumps(body)
        return self._retrying(lambda: self._read_once("POST", path, [], content), path)

    def _retrying(self, once: Callable[[], Any], path: str) -> Any:
        attempt = 0
        while True:
            try:
                return once()
            except errors.UpstreamError as exc:
                if not exc.transient or attempt >= self.settings.max_retries:
                    raise
                delay = self._delay(attempt, exc)
                if delay is None:
                    raise
                log.warning(
                    "upstream %s%s failed (%s), retry %d/%d in %.1fs",
                    self.base_url,
                    path,
                    exc.message,
                    attempt + 1,
                    self.settings.max_retries,
                    delay,
                )
                self._sleep(delay)
                attempt += 1

    def _delay(self, attempt: int, exc: errors.UpstreamError) -> float | None:
        if isinstance(exc, errors.RateLimited) and exc.retry_after is not None:
            if exc.retry_after > self.settings.max_retry_after:
                return None
            return exc.retry_after + random.uniform(0, 0.25)
        ceiling = min(self.settings.backoff_cap, self.settings.backoff_base * 2**attempt)
        # Full jitter keeps many workers from retrying in step.
        return random.uniform(ceiling / 2, ceiling)

    def post_json(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """POST `body` (or nothing) to `path` and return the decoded JSON object the provider answered.

        The provider acts on a POST, so it is never re-sent once it may have arrived: a timeout after the
        request went out, a connection dropped before the whole answer came, a 5xx, or a 200 that cannot be
        read raises `OutcomeUnknown`, and the caller re-reads the state instead. A connection that could not
        be opened and a 429 (the provider refused the request) are retried like a GET, within the same caps.
        """
        content = orjson.dumps(body) if body is not None else None
        url = f"{self.base_url}{path}"
        attempt = 0
        while True:
            try:
                return self._post_once(path, content)
            except errors.UpstreamError as exc:
                if not exc.transient or attempt >= self.settings.max_retries:
                    raise
                delay = self._delay(attempt, exc)
                if delay is None:
                    raise
                log.warning(
                    "upstream POST %s was not accepted (%s), retry %d/%d in %.1fs",
                    url,
                    exc.message,
                    attempt + 1,
                    self.settings.max_retries,
                    delay,
                )
                self._sleep(delay)
                attempt += 1

    def _post_once(self, path: str, content: bytes | None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            status, reason, retry_after, body = self._fetch("POST", path, [], content)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # No connection, so nothing was sent: as safe to try again as a GET.
            raise errors.Unreachable(
                f"could not reach {self.base_url}: {self._scrub(_describe(exc))}", url=url
            ) from None
        except (httpx.TransportError, errors.BadResponse) as exc:
            detail = exc.message if isinstance(exc, errors.BadResponse) else _describe(exc)
            raise errors.OutcomeUnknown(
                f"POST {url} was sent but its answer was lost ({self._scrub(detail)}); "
                "the provider may have acted: read the state again before deciding",
                url=url,
            ) from None
        if status == 200:
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                raise errors.OutcomeUnknown(
                    f"POST {url} answered 200 with a body that is not a JSON object ({len(body)} bytes); "
                    "the provider probably acted: read the state again",
                    status_code=status,
                    url=url,
                )
            return data
        message = self._scrub(upstream_message(body, self._scrub) or reason or f"HTTP {status}")
        if status == 408 or status >= 500:
            # A gateway's 502 or 504 says nothing of whether the service behind it acted.
            raise errors.OutcomeUnknown(
                f"POST {url} answered HTTP {status} ({message}); the provider may have acted: "
                "read the state again before deciding",
                status_code=status,
                url=url,
            )
        raise self._status_error(status, message, retry_after, url)

    def _read_once(
        self, method: str, path: str, query: list[tuple[str, str]], content: bytes | None = None
    ) -> Any:
        """One request that changes nothing at the provider (a GET, or the block preview's POST)."""
        url = f"{self.base_url}{path}"
        try:
            status, reason, retry_after, body = self._fetch(method, path, query, content)
        except httpx.TimeoutException as exc:
            raise errors.Unreachable(
                f"timed out talking to {self.base_url} ({type(exc).__name__})", url=url
            ) from None
        except httpx.TransportError as exc:
            # RemoteProtocolError covers bodies cut short; it is as transient as a refused connection.
            raise errors.Unreachable(
                f"could not reach {self.base_url}: {self._scrub(_describe(exc))}", url=url
            ) from None
        if status == 200:
            try:
                return orjson.loads(body)
            except orjson.JSONDecodeError:
                raise errors.BadResponse(
                    f"{self.base_url} answered 200 with a body that is not JSON ({len(body)} bytes)",
                    status_code=status,
                    url=url,
                ) from None
        message = self._scrub(upstream_message(body, self._scrub) or reason or f"HTTP {status}")
        raise self._status_error(status, message, retry_after, url)

    def _status_error(
        self, status: int, message: str, retry_after: str | None, url: str
    ) -> errors.UpstreamError:
        if status == 401:
            return errors.RejectedKey(
                f"the upstream rejected the API key: {message}", status_code=status, url=url
            )
        if status == 400:
            return errors.BadRequest(message, status_code=status, url=url)
        if status == 404:
            return errors.NotFound(message, status_code=status, url=url)
        if status == 429:
            return errors.RateLimited(
                f"rate limited by the upstream: {message}",
                retry_after=_retry_after(retry_after),
                status_code=status,
                url=url,
            )
        if status in RETRYABLE_STATUSES:
            return errors.ServerError(
                f"HTTP {status} from the upstream: {message}", status_code=status, url=url
            )
        return errors.UpstreamError(
            f"HTTP {status} from the upstream: {message}", status_code=status, url=url
        )

    def _fetch(
        self, method: str, path: str, query: list[tuple[str, str]], content: bytes | None = None
    ) -> tuple[int, str, str | None, bytes]:
        """One request, reading the body in chunks so that size and total time stay bounded."""
        started = time.monotonic()
        deadline = started + self.settings.total_timeout
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json"} if content is not None else None
        # Counted as "error" (no answer) unless a whole answer was read.
        status: int | None = None
        try:
            with self._http.stream(
                method, path, params=tuple(query), content=content, headers=headers
            ) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.settings.max_body_bytes:
                        raise errors.BadResponse(
                            f"{self.base_url} sent a body larger than {self.settings.max_body_bytes} bytes",
                            status_code=response.status_code,
                            url=url,
                        )
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the whole response took longer than the total timeout")
                    chunks.append(chunk)
                status = response.status_code
                return (
                    response.status_code,
                    response.reason_phrase,
                    response.headers.get("Retry-After"),
                    b"".join(chunks),
                )
        finally:
            metrics.observe(self.settings.metrics_source, method, path, status, time.monotonic() - started)

    def _scrub(self, text: str) -> str:
        """Upstream texts are shown to users; a server echoing the key back must not leak it."""
        return scrub_key(text, self.settings.api_key)


def scrub_key(text: str, key: str, replacement: str = "***") -> str:
    """`text` without `key` in any form a server plausibly echoes it in: raw in any letter case;
    percent-encoded (either hex case, + for a space, once or twice over, all of it or only some characters);
    JSON-, Python- or HTML-escaped; base64-encoded, alone or inside a longer encoded value."""
    if not key or len(key) < 4:
        return text
    for pattern in _key_patterns(key):
        text = pattern.sub(lambda _match: replacement, text)
    return text


@functools.lru_cache(maxsize=16)
def _key_patterns(key: str) -> tuple[re.Pattern[str], ...]:
    """The key as a pattern whose every character matches any of its encodings, so a mix of them (a server
    that percent-encodes only the reserved characters, say) is found too; and its base64 forms."""
    spelled = re.compile("".join(_character_forms(char) for char in key), re.IGNORECASE)
    encoded = sorted(_base64_forms(key.encode()), key=len, reverse=True)
    if not encoded:
        return (spelled,)
    # Base64 is case-sensitive: any other letter case is another value, not the key.
    return spelled, re.compile("|".join(map(re.escape, encoded)))


def _character_forms(char: str) -> str:
    point = ord(char)
    forms = [
        re.escape(char),
        # %2B, %2b, and %252B from a server that encoded an encoded text again.
        "".join(f"%(?:25)?{byte:02x}" for byte in char.encode()),
        rf"&#0*{point};",
        rf"&#x0*{point:x};",
    ]
    if point <= 0xFFFF:
        forms.append(rf"\\u{point:04x}")
    if point <= 0xFF:
        forms.append(rf"\\x{point:02x}")
    if char == " ":
        forms.append(r"\+")
    if char in "/\"'":
        forms.append(re.escape(f"\\{char}"))
    return f"(?:{'|'.join(forms)})"


def _base64_forms(key: bytes) -> set[str]:
    """The key's base64 wherever it starts in an encoded value (after 0, 1 or 2 other bytes): only the
    characters that come from the key's bits alone, standard and URL-safe."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + key).decode()
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(key)) // 6
        fragment = encoded[first:last]
        # A short fragment could stand for something else in a longer base64 value.
        if len(fragment) >= 8:
            forms.update({fragment, fragment.replace("+", "-").replace("/", "_")})
    return forms


def upstream_message(body: bytes, scrub: Callable[[str], str] = str) -> str:
    """The upstream's error text from either body style: {"message": str|[str]} (NestJS adds "error").

    A text that is not JSON is cut to 200 characters after `scrub`, so the cut cannot leave the start of
    an echoed key behind."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = scrub(body.decode("utf-8", "replace")).strip()[:200]
        return text if text and not text.startswith("<") else ""
    if not isinstance(data, dict):
        return ""
    message = data.get("message")
    if isinstance(message, list):
        return "; ".join(str(m) for m in message)
    if message:
        return str(message)
    return str(data.get("error") or "")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    # "inf", "nan" or absurd waits: treated as unsaid rather than overflowing every date computed from them.
    if not math.isfinite(seconds) or seconds > MAX_RETRY_AFTER_SECONDS:
        return None
    return max(0.0, seconds)


def _describe(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]


def _encode_params(params: QueryParams) -> list[tuple[str, str]]:
    """Drop None, send booleans as true/false and sequences as a repeated key."""
    query: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query.append((key, "true" if value else "false"))
        elif isinstance(value, str | int):
            query.append((key, str(value)))
        else:
            query.extend((key, str(item)) for item in value)
    return query
