"""Transports: each carries one kind of outgoing message to its service, and only that.

A transport formats a row's fixed message for its service and sends it, raising `SendFailed` (transient or
not) when the service did not take it. Claiming, leases, retries and recording live in
`dashboard.alerts.outbox`, once for every transport (the healthchecks model: one `Transport` per kind).
"""

from __future__ import annotations

from typing import Generic, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from dashboard.alerts.models import OutboxMessage

M = TypeVar("M", bound=OutboxMessage)

# Every HTTP transport's timeouts; a send (two requests at most) stays well inside outbox.SEND_DEADLINE.
HTTP_TIMEOUT = httpx.Timeout(10.0, connect=5.0)


class SendFailed(Exception):
    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class Transport(Generic[M]):
    """Sends one row's message. `secrets` are what must never appear in a recorded error."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self.secrets = [s for s in (secrets or []) if s]

    def send(self, message: M) -> None:
        raise NotImplementedError

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)


def scrub(text: str, secrets: list[str]) -> str:
    """Remove a channel's URL, secret and the URL's token-like parts from a text we store or log."""
    parts: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        parts.add(secret)
        split = urlsplit(secret)
        pieces = [split.path, split.query, split.username or "", split.password or ""]
        if split.scheme not in ("http", "https"):
            pieces.append(split.netloc)
        for piece in pieces:
            parts.update(
                p for p in piece.replace("?", "/").replace("&", "/").replace("=", "/").split("/") if len(p) >= 6
            )
    for part in sorted(parts, key=len, reverse=True):
        text = text.replace(part, "[secret]").replace(quote(part, safe=""), "[secret]")
    return text


def post(url: str, *, content: bytes, headers: dict[str, str]) -> httpx.Response:
    """One POST to a service; its failure said as SendFailed, transient where a retry may help."""
    try:
        response = httpx.post(url, content=content, headers=headers, timeout=HTTP_TIMEOUT, follow_redirects=False)
    except httpx.TimeoutException as exc:
        raise SendFailed(f"timed out: {type(exc).__name__}", transient=True) from exc
    except httpx.HTTPError as exc:
        raise SendFailed(f"unreachable: {type(exc).__name__}: {exc}", transient=True) from exc
    if response.is_success:
        return response
    transient = response.status_code in (408, 425, 429) or response.status_code >= 500
    raise SendFailed(f"HTTP {response.status_code}: {response.text[:300]}", transient=transient)
