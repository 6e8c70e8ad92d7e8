"""Error bodies in each host's style, and the texts the contract fixes."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

MISSING_KEY = "API KEY missing from x-api-key header"
INVALID_KEY = "Token is invalid format"
RATE_LIMITED = "Rate limit exceeded"


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    414: "URI Too Long",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


def reason(status: int) -> str:
    return _REASONS.get(status, "Error")


def ok(data: object) -> Response:
    return Response(200, orjson.dumps(data))


def error(status: int, message: str | list[str], *, nest: bool) -> Response:
    """EVM and Streams answer {"message": ...}; the Aptos host (NestJS) adds statusCode and error."""
    if nest:
        body: dict[str, object] = {
            "statusCode": status,
            "message": message,
            "error": reason(status),
        }
    else:
        body = {"message": message}
    return Response(status, orjson.dumps(body))
