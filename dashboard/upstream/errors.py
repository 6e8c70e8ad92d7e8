"""Typed upstream errors. Texts carry the upstream's own message and never the API key."""

from __future__ import annotations


class UpstreamError(Exception):
    """Base class. `transient` tells the caller whether trying again later can help."""

    transient = False
    kind = "upstream_error"

    def __init__(self, message: str, *, status_code: int | None = None, url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.url = url


class InvalidRequest(UpstreamError):
    """Rejected before sending: a bad address, chain or parameter. No request went out."""

    kind = "invalid_request"


class BadRequest(UpstreamError):
    """HTTP 400: the upstream refused the parameters; `message` is its text."""

    kind = "bad_request"


class RejectedKey(UpstreamError):
    """HTTP 401: the upstream rejected the API key (missing, malformed or revoked)."""

    kind = "rejected_key"


class NotFound(UpstreamError):
    kind = "not_found"


class RateLimited(UpstreamError):
    """HTTP 429 after the client's own retries; `retry_after` is in seconds when the upstream said."""

    transient = True
    kind = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ServerError(UpstreamError):
    """HTTP 5xx (or another unexpected status) after the client's own retries."""

    transient = True
    kind = "upstream_error"


class Unreachable(UpstreamError):
    """Connection refused, DNS failure or timeout after the client's own retries."""

    transient = True
    kind = "unreachable"


class BadResponse(UpstreamError):
    """A 200 whose body is not the JSON document the contract describes (truncated, HTML, wrong shape)."""

    transient = True
    kind = "bad_response"


class OutcomeUnknown(UpstreamError):
    """A write (a replay, a status change) went out and its answer was lost: a timeout after sending, a
    connection dropped mid-answer, a 5xx, or a 200 whose body cannot be read.

    The provider may or may not have acted. Sending it again could act twice, so the client never does;
    nor may the caller retry it as a transient failure: it re-reads the state the write meant to change
    (the stream's status, the history record) and decides from what it finds.
    """

    transient = False
    kind = "outcome_unknown"
