"""What every log line says about where it comes from: the request id on web lines, the Celery task id on
worker lines. With LOG_FORMAT=json each line is one JSON object (python-json-logger) carrying both fields.

The request id is the proxy's `X-Request-ID` when it sends a sane one (so a line can be followed from the
proxy's log into ours), else a new one; it is echoed in the response's `X-Request-ID`. This module imports
no app.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="")
_SANE = re.compile(r"^[A-Za-z0-9._-]{8,64}\Z")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        offered = request.headers.get("X-Request-ID", "")
        request_id = offered if _SANE.match(offered) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            REQUEST_ID.reset(token)
        response["X-Request-ID"] = request_id
        return response


class ContextFilter(logging.Filter):
    """Adds `request_id` and `task_id` to every record ("" where there is none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        record.task_id = _task_id()
        return True


def _task_id() -> str:
    try:
        from celery import current_task
    except ImportError:  # pragma: no cover - celery is a dependency
        return ""
    task = current_task
    request = getattr(task, "request", None) if task else None
    return str(getattr(request, "id", "") or "")
