"""LOG_FORMAT=json: one JSON object a line, with the request id on web lines and the task id on worker lines."""

from __future__ import annotations

import copy
import io
import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory

from dashboard.celery import app
from dashboard.log_context import RequestIdMiddleware


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    config: dict[str, Any] = copy.deepcopy(settings.LOGGING)
    config["handlers"]["console"]["formatter"] = "json"
    config["handlers"]["console"]["stream"] = stream = io.StringIO()
    logging.config.dictConfig(config)
    try:
        yield stream
    finally:
        logging.config.dictConfig(settings.LOGGING)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_a_web_line_carries_the_request_id_the_response_echoes(json_lines: io.StringIO) -> None:
    def view(request: HttpRequest) -> HttpResponse:
        logging.getLogger("dashboard.test").warning("served %s", request.path)
        return HttpResponse("ok")

    response = RequestIdMiddleware(view)(RequestFactory().get("/x"))
    (line,) = [entry for entry in lines(json_lines) if entry["logger"] == "dashboard.test"]
    assert line["message"] == "served /x" and line["level"] == "WARNING"
    assert line["request_id"] == response["X-Request-ID"] and len(line["request_id"]) == 32
    # A proxy's sane id is kept; a hostile one is replaced.
    kept = RequestIdMiddleware(view)(RequestFactory().get("/x", HTTP_X_REQUEST_ID="edge-1234abcd"))
    assert kept["X-Request-ID"] == "edge-1234abcd"
    replaced = RequestIdMiddleware(view)(RequestFactory().get("/x", HTTP_X_REQUEST_ID="a\nb<script>"))
    assert replaced["X-Request-ID"] != "a\nb<script>" and len(replaced["X-Request-ID"]) == 32


def test_a_worker_line_carries_the_task_id(json_lines: io.StringIO) -> None:
    @app.task(name="tests.log_something")
    def log_something() -> None:
        logging.getLogger("dashboard.test").warning("working")

    app.conf.task_always_eager = True
    try:
        result = log_something.apply_async(task_id="task-1234")
    finally:
        app.conf.task_always_eager = False
    assert result.id == "task-1234"
    (line,) = [entry for entry in lines(json_lines) if entry["logger"] == "dashboard.test"]
    assert line["task_id"] == "task-1234" and line["request_id"] == ""


def test_every_page_answers_with_a_request_id(db: None) -> None:
    assert len(Client().get("/healthz")["X-Request-ID"]) == 32
