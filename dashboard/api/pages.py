"""Bounded lists: a `limit` with a maximum and keyset pages behind an opaque cursor, the deliveries list's
encoding (`web.forms.encode_cursor`: the row's time and id)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest

from dashboard import replica
from dashboard.api.problems import Problem
from dashboard.web.forms import decode_cursor, encode_cursor

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def int_cursor(date: datetime, pk: int) -> str:
    """A row with an integer id, in the same cursor form as a delivery's."""
    return encode_cursor(date, uuid.UUID(int=pk))


def read_int_cursor(text: str) -> tuple[datetime, int] | None:
    if not text:
        return None
    try:
        date, pk = decode_cursor(text)
    except forms.ValidationError as exc:
        raise Problem(400, "cursor: this cursor is not valid; start again without it.",
                      kind="invalid-parameter") from exc
    return date, pk.int


def key_cursor(key: str) -> str:
    """The position after a row of a list ordered in memory (the Streams page's), by the row's key."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def read_key_cursor(text: str) -> str | None:
    if not text:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise Problem(400, "cursor: this cursor is not valid; start again without it.",
                      kind="invalid-parameter") from exc


def next_url(request: HttpRequest, cursor: str | None) -> str | None:
    """The same request's next page: every parameter kept, the cursor replaced."""
    if cursor is None:
        return None
    query = [(k, v) for k, values in request.GET.lists() if k != "cursor" for v in values]
    return f"{request.path}?{urlencode([*query, ('cursor', cursor)])}"


def on_replica(view: Callable[..., Any]) -> Callable[..., Any]:
    """`replica.reads_replica` for an endpoint that returns data, not a response: its reads go to a replica
    current enough, else to the primary; a replica that fails mid-read is read again from the primary."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not replica.configured() or not replica.choose_database().on_replica:
            return view(request, *args, **kwargs)
        try:
            with replica.reading_replica():
                return view(request, *args, **kwargs)
        except (OperationalError, InterfaceError):
            return view(request, *args, **kwargs)

    return wrapped
