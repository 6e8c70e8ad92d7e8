"""The outbox's guarantees, proved once for every transport against real services on loopback: an SMTP server
(mail), an Apprise JSON endpoint (chat), a signed webhook receiver, and PagerDuty's and Opsgenie's APIs.

- A sender SIGKILLed while the service holds its answer: the row is found lost once its lease lapsed, sent again
  with the same idempotency key, and the resolution that waited behind it goes out right after.
- The database dropped after the service accepted: the row is recorded sent, never sent again.
- Redis restarted while a sender waits for the service: the lease is gone, yet no second sender takes the row.
- Two workers at once: one request.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from dashboard import locks
from dashboard.alerts import evaluate, outbox
from dashboard.alerts.channels import store_settings
from dashboard.alerts.models import Channel, ChannelKind, Incident, NotificationKind, NotificationStatus
from dashboard.locks import is_held
from tests.alerts.factories import failures, make_rule, make_source
from tests.alerts.smtp import Sink, smtp_sink
from tests.checks import server_conninfo, subprocess_database_url

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = ["mail", "apprise", "webhook", "pagerduty", "opsgenie"]
OPEN, RESOLVE = "open", "resolve"


@dataclass
class Arrival:
    kind: str
    key: str


@dataclass
class Service:
    """What a service received, each message as (open or resolve, its idempotency key), as it arrived."""

    arrivals: list[Arrival] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    # Seconds the service holds its answer, and what runs meanwhile (the fault).
    hold: float = 0.0
    during: Callable[[], None] | None = None

    def receive(self, kind: str, key: str) -> None:
        self.arrivals.append(Arrival(kind, key))
        self.arrived.set()
        if self.during is not None:
            during, self.during = self.during, None
            during()
        time.sleep(self.hold)

    def of(self, kind: str) -> list[Arrival]:
        return [a for a in self.arrivals if a.kind == kind]


def _classify(path: str, headers: Any, body: bytes) -> tuple[str, str]:
    data = json.loads(body or b"{}")
    if "event_action" in data:  # PagerDuty
        return (OPEN if data["event_action"] == "trigger" else RESOLVE), data["dedup_key"]
    if path.split("?")[0].endswith("/close"):  # Opsgenie's close, by alias
        return RESOLVE, path.split("/")[-2]
    if "alias" in data:  # Opsgenie's alert
        return OPEN, data["alias"]
    if "event" in data:  # the signed webhook
        return (OPEN if data["event"] == "incident.opened" else RESOLVE), data["dedup_key"]
    # Apprise's JSON: a failure opens, a success resolves; the title names the incident.
    return (OPEN if data.get("type") == "failure" else RESOLVE), data.get("title", "")


@contextmanager
def http_service() -> Iterator[tuple[Service, str]]:
    service = Service()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            service.receive(*_classify(self.path, self.headers, body))
            answer = b'{"status":"success"}'
            try:
                self.send_response(202)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except OSError:
                pass  # the sender is gone

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class HoldingSink(Sink):
    service: Service

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        kind = OPEN if parsed["X-Stream-Dashboard-Kind"] == NotificationKind.OPENED else RESOLVE
        self.service.receive(kind, str(parsed["Message-ID"]))
        return "250 Message accepted"


@dataclass
class Setup:
    transport: str
    service: Service
    # The child process's settings, so that it reaches the same service.
    env: dict[str, str]

    @property
    def box(self) -> outbox.Outbox[Any]:
        return outbox.outbox("mail" if self.transport == "mail" else "channel")

    def row(self, kind: str) -> Any:
        return self.box.rows().get(kind=kind)


@pytest.fixture(params=TRANSPORTS)
def case(request: Any, settings: Any) -> Iterator[Setup]:
    transport = request.param
    settings.LOCK_LEASE_SECONDS = 3
    if transport == "mail":
        with smtp_sink(HoldingSink) as sink:
            sink.service = Service()  # type: ignore[attr-defined]
            settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
            settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", sink.port
            settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
            settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
            make_rule(recipients="ops@example.com", window_minutes=5, grace_minutes=1)
            env = {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(sink.port), "EMAIL_URL": ""}
            yield Setup(transport, sink.service, env)  # type: ignore[attr-defined]
        return
    with http_service() as (service, url):
        kind, channel_url, secret = {
            "apprise": (ChannelKind.APPRISE, f"json://{url.removeprefix('http://')}/hook", None),
            "webhook": (ChannelKind.WEBHOOK, f"{url}/hook", "s" * 32),
            "pagerduty": (ChannelKind.PAGERDUTY, f"{url}/v2/enqueue", "routing-key-0123456789"),
            "opsgenie": (ChannelKind.OPSGENIE, f"{url}/v2/alerts", "genie-key-0123456789"),
        }[transport]
        channel = Channel(name=transport, kind=kind)
        store_settings(channel, url=channel_url, secret=secret)
        channel.save()
        rule = make_rule(recipients="", window_minutes=5, grace_minutes=1)
        rule.channels.set([channel])
        yield Setup(transport, service, {})


def open_incident() -> Incident:
    now = timezone.now()
    failures(make_source(), now, 3)
    evaluate.evaluate_all(now)
    return Incident.objects.get()


def resolve(incident: Incident) -> None:
    evaluate.resolve_incident(incident, timezone.now(), by="ops")


def sender(case: Setup, pk: int) -> subprocess.Popen[str]:
    """A worker in a child process sending one row, to be killed while the service holds its answer."""
    env = {
        **os.environ, "DEBUG": "1", "DATABASE_URL": subprocess_database_url(), "MORALIS_API_KEY": "",
        "LOCK_LEASE_SECONDS": "3", "PYTHONUNBUFFERED": "1", **case.env,
    }
    code = f"from dashboard.alerts import outbox; outbox.send_message({case.box.name!r}, {pk})"
    return subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.05)


def test_a_message_whose_sender_was_killed_mid_request_goes_once_more_and_its_resolution_right_after(
    case: Setup,
) -> None:
    incident = open_incident()
    opening = case.row(NotificationKind.OPENED)
    case.service.hold = 6.0
    child = sender(case, opening.pk)
    try:
        if not case.service.arrived.wait(30):
            pytest.fail(f"the sender never reached the service: {child.communicate(timeout=5)[0]}")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    case.service.hold = 0.0
    opening.refresh_from_db()
    assert (opening.status, opening.attempts) == (NotificationStatus.SENDING, 1)
    # The stream recovers while the opening is stuck with its dead sender.
    resolve(incident)

    # Nobody holds the dead sender's lease once it lapsed; from then on the sweep finds the row.
    wait_until("the dead sender's lease to lapse", lambda: not is_held(opening.lease_name()), timeout=10)
    assert opening.pk not in case.box.lost(timezone.now())  # a live send could still be under way
    later = timezone.now() + outbox.SEND_DEADLINE + timedelta(seconds=1)
    assert opening.pk in case.box.lost(later)

    sent = list(outbox.send_due(later))
    assert [(name, outcome) for name, _pk, outcome in sent] == [(case.box.name, "sent"), (case.box.name, "sent")]
    opens, resolves = case.service.of(OPEN), case.service.of(RESOLVE)
    # The cut-off request and its one repeat, under one key: the service sees one incident.
    assert len(opens) == 2 and len({a.key for a in opens}) == 1
    assert len(resolves) == 1 and case.service.arrivals[-1].kind == RESOLVE
    assert case.row(NotificationKind.OPENED).status == NotificationStatus.SENT
    # Every later sweep leaves both alone.
    assert list(outbox.send_due(later + timedelta(hours=1))) == []
    assert len(case.service.arrivals) == 3


def _kill_my_database_connection() -> Callable[[], None]:
    """What a Postgres restart does to this process's connection: the server ends it. Made here, run from the
    service's thread while it holds its answer back."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    conninfo = server_conninfo()

    def terminate() -> None:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])

    return terminate


def test_a_message_the_service_accepted_is_recorded_when_the_database_drops_and_never_sent_again(
    case: Setup,
) -> None:
    open_incident()
    opening = case.row(NotificationKind.OPENED)
    case.service.hold = 1.0
    case.service.during = _kill_my_database_connection()

    assert case.box.send(opening.pk) == NotificationStatus.SENT
    assert case.row(NotificationKind.OPENED).status == NotificationStatus.SENT
    assert len(case.service.of(OPEN)) == 1
    later = timezone.now() + timedelta(minutes=30)
    assert list(outbox.send_due(later)) == []
    assert case.box.send(opening.pk, later) == NotificationStatus.SENT
    assert len(case.service.of(OPEN)) == 1


def test_a_message_accepted_by_a_sender_that_died_before_writing_its_row_is_recorded_not_resent(
    case: Setup,
) -> None:
    open_incident()
    opening = case.row(NotificationKind.OPENED)
    assert case.box.send(opening.pk) == NotificationStatus.SENT
    # As if the worker died after the service's answer: the row still says sending, nobody holds its lease.
    claimed = timezone.now() - timedelta(minutes=5)
    case.box.rows().filter(pk=opening.pk).update(status=NotificationStatus.SENDING, sent_at=None, claimed_at=claimed)

    assert opening.pk in case.box.lost()
    assert [outcome for _n, _pk, outcome in outbox.send_due()] == [NotificationStatus.SENT]
    assert case.row(NotificationKind.OPENED).status == NotificationStatus.SENT
    assert len(case.service.of(OPEN)) == 1


def test_a_redis_restart_under_a_live_sender_hands_its_message_to_nobody_else(case: Setup) -> None:
    open_incident()
    opening = case.row(NotificationKind.OPENED)
    outcomes: dict[str, str] = {}

    def second_worker() -> None:
        # Redis lost every lease (it keeps nothing on disk); a second worker and a sweep look at the row.
        locks.redis_client().delete(f"lock:{opening.lease_name()}")
        outcomes["lost"] = str(case.box.lost(timezone.now()))
        outcomes["second"] = case.box.send(opening.pk)

    case.service.hold = 0.5
    case.service.during = lambda: threading.Thread(target=second_worker).start() or time.sleep(0.3)
    # The database work of the second worker runs on its own thread's connection.
    assert case.box.send(opening.pk) == NotificationStatus.SENT
    wait_until("the second worker", lambda: "second" in outcomes, timeout=10)
    assert outcomes == {"lost": "[]", "second": NotificationStatus.SENDING}
    assert len(case.service.of(OPEN)) == 1


def test_two_workers_at_once_send_one_message(case: Setup) -> None:
    open_incident()
    opening = case.row(NotificationKind.OPENED)
    case.service.hold = 0.5
    start = threading.Barrier(2)
    results: list[str] = []

    def work() -> None:
        start.wait()
        try:
            results.append(case.box.send(opening.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [NotificationStatus.SENDING, NotificationStatus.SENT]
    assert len(case.service.of(OPEN)) == 1
