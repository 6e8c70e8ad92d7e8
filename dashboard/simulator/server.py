"""The simulator over real HTTP: a threaded stdlib server, usable in-process by tests.

The stdlib server is enough here: one process, a handful of clients, no TLS; it keeps the
simulator free of dependencies and starts in milliseconds inside a test.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from dashboard.simulator import app, responses
from dashboard.simulator.config import SimulatorConfig
from dashboard.simulator.responses import Response, error
from dashboard.simulator.world import World

log = logging.getLogger("dashboard.simulator")

MAX_REQUEST_LINE = 16 * 1024


class SimulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], world: World) -> None:
        self.world = world
        self.bucket = TokenBucket()
        super().__init__(address, SimulatorHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hung up (its timeout ran out while the latency knob held the answer) is routine.
        log.debug("connection from %s ended abruptly", client_address, exc_info=True)


class TokenBucket:
    """The API's rate limit: `rate` requests a second, up to one second of them at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens = 0.0
        self._at = 0.0

    def take(self, rate: float) -> float:
        """0 when a request may be answered now (and counts it), else the seconds until one may."""
        with self._lock:
            now = time.monotonic()
            burst = max(1.0, rate)
            self._tokens = burst if self._at == 0.0 else min(burst, self._tokens + (now - self._at) * rate)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / rate


class SimulatorHandler(BaseHTTPRequestHandler):
    server: SimulatorHTTPServer
    # Keep-alive, so that clients with a connection pool are exercised as in production.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, keep-alive clients wait ~40 ms per answer.
    disable_nagle_algorithm = True
    server_version = "moralis-simulator"
    sys_version = ""

    def setup(self) -> None:
        # A client that connects and goes quiet (or announces a body it never sends) is let go after a while
        # instead of holding its thread for ever.
        super().setup()
        self.connection.settimeout(self.server.world.config.idle_timeout)

    def parse_request(self) -> bool:
        # Not the previous keep-alive request's path: a refusal of this one must not be styled after it.
        self.path = ""
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            # An HTTP/0.9 answer has no status line or headers; refuse it, as Node's parser does.
            self.send_error(400, "HTTP/0.9 is not supported")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (bad request line, URI or headers too long), as JSON in the host's style."""
        if code == 501 and self.command:
            # An unknown method: the API's own answer (404 or 405 in JSON), not the stdlib's 501 page.
            self._serve()
            return
        # The parser may refuse the request line before it sets `path` (a bad version, say).
        words = (getattr(self, "requestline", "") or "").split()
        target = getattr(self, "path", "") or (words[1] if len(words) > 1 else "")
        nest = app.is_nest(urlsplit(target).path)
        response = error(code, message or responses.reason(code), nest=nest)
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            # Answer with a status line all the same: the client must see that it was refused.
            self.request_version = "HTTP/1.0"
        log.info("%s refused: %d %s", self.client_address[0], code, (message or "")[:100])
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        self._serve()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def do_PUT(self) -> None:  # noqa: N802
        self._serve()

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve()

    def do_PATCH(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self, *, head: bool = False) -> None:
        started = time.perf_counter()
        world = self.server.world
        # Drain any request body so the connection stays usable.
        length = self.headers.get("Content-Length")
        self._body = b""
        if self.headers.get("Transfer-Encoding"):
            # A chunked body is not read; what is left of it must not be taken for the next request.
            self.close_connection = True
        elif length and length.isascii() and length.isdigit() and int(length) <= 1_000_000:
            self._body = self.rfile.read(int(length))
        elif length:
            self.close_connection = True
        split = urlsplit(self.path)
        path = split.path
        nest = app.is_nest(path)
        truncated = False
        try:
            response, truncated = self._respond(world, path, split.query, nest)
        except Exception:
            log.exception("simulator failed on %s %s", self.command, path[:200])
            response = error(500, "Internal server error", nest=nest)
        self._send(response, head=head, truncate=truncated)
        world.requests_served += 1
        log.info(
            "%s %s %s %d %dB %.1fms%s",
            self.client_address[0],
            self.command,
            _loggable(self.path, world.api_key),
            response.status,
            len(response.body),
            (time.perf_counter() - started) * 1000,
            " truncated" if truncated else "",
        )

    def _respond(self, world: World, path: str, raw_query: str, nest: bool) -> tuple[Response, bool]:
        if app.is_media(path):
            # The media CDN is not the API: no key, no faults, and the query string is ignored.
            return app.handle(world, self._request(path, {})), False
        faults = world.faults
        if faults.latency_ms > 0:
            time.sleep(faults.latency_ms / 1000)
        if faults.rate_5xx > 0 and world.roll() < faults.rate_5xx:
            status = (500, 502, 503, 504)[int(world.roll() * 4)]
            if status in (502, 504) and not nest:
                # What a load balancer in front of the API sends: HTML, not JSON.
                body = f"<html><body><h1>{status} {responses.reason(status)}</h1></body></html>".encode()
                return Response(status, body, {"Content-Type": "text/html"}), False
            return error(status, "Internal server error", nest=nest), False
        try:
            query = app.parse_query(raw_query)
        except app.BadParams as exc:
            return error(400, exc.messages if nest else exc.messages[0], nest=nest), False
        request = self._request(path, query)
        denied = app.check_key(world, request)
        if denied is None and faults.rate_limit > 0:
            wait = self.server.bucket.take(faults.rate_limit)
            if wait > 0:
                response = error(429, responses.RATE_LIMITED, nest=nest)
                response.headers["Retry-After"] = f"{wait:.3f}"
                return response, False
        if denied is None and faults.rate_429 > 0 and world.roll() < faults.rate_429:
            response = error(429, responses.RATE_LIMITED, nest=nest)
            response.headers["Retry-After"] = f"{faults.retry_after:g}"
            return response, False
        response = app.handle(world, request)
        truncate = response.status == 200 and faults.truncate_rate > 0 and world.roll() < faults.truncate_rate
        return response, truncate

    def _request(self, path: str, query: dict[str, list[str]]) -> app.Request:
        return app.Request(
            self.command, path, query, _lower_headers(self), _url(self.server), getattr(self, "_body", b"")
        )

    def _send(self, response: Response, *, head: bool, truncate: bool) -> None:
        body = response.body
        mode = self.server.world.faults.truncate_mode
        if truncate and mode == "body":
            body = body[: max(1, len(body) // 2)]
        self.send_response(response.status)
        self.send_header(
            "Content-Type", response.headers.pop("Content-Type", "application/json; charset=utf-8")
        )
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if truncate and mode != "body":
            self.close_connection = True
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if head:
            return
        if truncate and mode != "body":
            # Announce the full length, send half, hang up: the client sees the body end early.
            self.wfile.write(body[: max(1, len(body) // 2)])
            self.wfile.flush()
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        # The stdlib logs every request line to stderr; ours are logged once, above, without the key.
        pass

    def log_error(self, format: str, *args: object) -> None:  # noqa: A002
        log.warning("simulator: %s", (format % args)[:300])


def _lower_headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {name.lower(): value for name, value in handler.headers.items()}


def _loggable(target: str, api_key: str) -> str:
    """The request target for the log; the key is masked in case a caller put it in the URL."""
    target = target[:300]
    if api_key and api_key in target:
        target = target.replace(api_key, "***")
    return target


@dataclass
class RunningSimulator:
    server: SimulatorHTTPServer
    thread: threading.Thread
    world: World
    base_url: str

    @property
    def streams_base_url(self) -> str:
        return self.base_url

    @property
    def evm_base_url(self) -> str:
        return self.base_url

    @property
    def aptos_mainnet_base_url(self) -> str:
        return self.base_url + "/aptos/mainnet"

    @property
    def aptos_testnet_base_url(self) -> str:
        return self.base_url + "/aptos/testnet"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> RunningSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_server(config: SimulatorConfig, world: World | None = None) -> SimulatorHTTPServer:
    return SimulatorHTTPServer((config.host, config.port), world or World(config))


def serve_in_thread(config: SimulatorConfig) -> RunningSimulator:
    """Start the simulator on a background thread; `config.port = 0` picks a free port."""
    server = make_server(config)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="simulator", daemon=True
    )
    thread.start()
    return RunningSimulator(server, thread, server.world, _url(server))


def _url(server: SimulatorHTTPServer) -> str:
    """The base URL of the address the server listens on."""
    host, port = server.server_address[:2]
    shown = host if isinstance(host, str) and ":" not in host else f"[{host!s}]"
    return f"http://{shown}:{port}"
