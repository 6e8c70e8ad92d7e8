"""Opaque JWT-like cursors (`header.payload.signature`) that carry their page size and position.

Signed so that a tampered or foreign cursor is answered 400 instead of paging somewhere odd.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import orjson

_HEADER = base64.urlsafe_b64encode(orjson.dumps({"alg": "HS256", "typ": "JWT"})).rstrip(b"=").decode()


class InvalidCursor(ValueError):
    pass


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def encode(self, claims: dict[str, Any]) -> str:
        body = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
        return f"{_HEADER}.{body}.{self._sign(f'{_HEADER}.{body}')}"

    def decode(self, token: str, *, kind: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3 or len(token) > 4096:
            raise InvalidCursor("malformed cursor")
        if not hmac.compare_digest(parts[2], self._sign(f"{parts[0]}.{parts[1]}")):
            raise InvalidCursor("cursor signature does not match")
        try:
            claims = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise InvalidCursor("cursor payload is not JSON") from exc
        if not isinstance(claims, dict) or claims.get("kind") != kind:
            raise InvalidCursor("cursor belongs to another operation")
        return claims

    def _sign(self, signing_input: str) -> str:
        mac = hmac.new(self._secret, signing_input.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
