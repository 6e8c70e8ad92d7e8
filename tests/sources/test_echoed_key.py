"""A server that echoes the API key back in an error, in any encoding, gets it into no stored text, no page
and no health endpoint; the login-free health endpoints carry no upstream text at all. Against a real
loopback server that answers every request with the key it was sent, encoded."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from django.test import Client

from dashboard.polling.walks import poll
from dashboard.sources.models import Source
from dashboard.upstream import errors
from tests.factories import make_source

pytestmark = pytest.mark.django_db

KEY = "K1x+/=eyJub25jZSI6IjQ1NmQ0Y2Ji+OGQ1/YjQ4ZDhiIiwib3JnSWQiOiI0MTI3NjMifQ=="
# Upstream words that must reach the signed-in pages but never the health endpoints.
MARKER = "db-7.internal.example"


def percent_all(text: str) -> str:
    return "".join(f"%{byte:02X}" for byte in text.encode())


ENCODINGS: dict[str, Callable[[str], str]] = {
    "percent-encoded": lambda key: quote(key, safe=""),
    "percent-encoded, lower-case hex": lambda key: quote(key, safe="").replace("%2B", "%2b").replace("%2F", "%2f"),
    "form-encoded, upper case": lambda key: quote_plus(key).upper(),
    "every byte percent-encoded": percent_all,
    "percent-encoded twice": lambda key: quote(quote(key, safe=""), safe=""),
    "JSON-escaped": lambda key: json.dumps(key)[1:-1].replace("/", "\\/"),
    "JSON unicode escapes": lambda key: "".join(f"\\u{ord(char):04x}" for char in key),
    "base64": lambda key: base64.b64encode(key.encode()).decode(),
    "base64 of a basic auth value": lambda key: base64.b64encode(f"apikey:{key}".encode()).decode(),
    "URL-safe base64": lambda key: base64.urlsafe_b64encode(key.encode()).decode(),
}


def echoing_server(status: int, answer: Callable[[str], bytes]) -> Iterator[str]:
    class Echo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            body = answer(self.headers.get("X-API-Key", ""))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the parent's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def every_form_of_the_key(text: str) -> list[str]:
    forms = {KEY, KEY.upper(), KEY.lower(), *(encode(KEY) for encode in ENCODINGS.values())}
    # The part of each form that stands for the key alone: long enough to be the key, not a coincidence.
    return [form for form in forms if form[8:40].lower() in text.lower()]


def polled_with_failure(base_url: str) -> Source:
    source = make_source("echo", base_url=base_url, api_key=KEY)
    with pytest.raises(errors.UpstreamError):
        poll(source)
    source.refresh_from_db()
    return source


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_key_echoed_in_any_encoding_reaches_no_text(encoding: str, logged_in_client: Client) -> None:
    def answer(key: str) -> bytes:
        echoed = ENCODINGS[encoding](key)
        return json.dumps({"message": f"API key {echoed} is not valid for {MARKER}"}).encode()

    for base_url in echoing_server(401, answer):
        source = polled_with_failure(base_url)
        page = logged_in_client.get("/").content.decode()
        healthz = Client().get("/healthz").content.decode()
        readyz = Client().get("/readyz").content.decode()

    assert source.key_rejected_at is not None and "is not valid for" in source.last_error_message
    for text in (source.last_error_message, page, healthz, readyz):
        assert every_form_of_the_key(text) == []
    # The signed-in banner says what the upstream said; the health endpoints only what went wrong.
    assert MARKER in page
    assert MARKER not in healthz and MARKER not in readyz
    assert "rejected the API key of source “echo”" in json.loads(healthz)["sources"][0]["problem"]
    assert json.loads(readyz)["sources"][0]["problem"] == json.loads(healthz)["sources"][0]["problem"]


def test_a_failing_source_is_named_on_the_health_endpoints_without_the_upstreams_words() -> None:
    def answer(key: str) -> bytes:
        return json.dumps({"message": f"bad request from {MARKER}: {quote(key, safe='')}"}).encode()

    for base_url in echoing_server(400, answer):
        source = polled_with_failure(base_url)
        with pytest.raises(errors.UpstreamError):
            poll(source)
        healthz = Client().get("/healthz").json()
        readyz = Client().get("/readyz").json()

    assert healthz["sources"][0]["problem"] == "polling of “echo” is failing (Upstream error)"
    assert readyz["sources"][0]["problem"] == healthz["sources"][0]["problem"]
    problem = Source.objects.get(pk=source.pk).problem()
    assert problem is not None and MARKER in problem.summary and every_form_of_the_key(problem.summary) == []


def test_a_text_answer_cut_short_leaves_no_start_of_the_key() -> None:
    # The key starts 20 characters before the 200 at which an upstream's plain text is cut.
    for base_url in echoing_server(401, lambda key: f"{'x' * 179} {key} is revoked".encode()):
        source = polled_with_failure(base_url)

    assert KEY[:12] not in source.last_error_message and "***" in source.last_error_message
