"""Faults injected from outside into a running ingestion, on a stack the tests start themselves (tests/faults/
stack.py): after each, the stored history equals the upstream's truth and polling has resumed by itself, in a
time each test measures and prints."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, connections
from django.utils import timezone

from tests.alerts.smtp import smtp_sink
from tests.checks import assert_derived_exact, assert_matches_upstream, assert_nothing_extra
from tests.faults.stack import Stack, wait_for

pytestmark = pytest.mark.faults


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n[faults] {line}")


def matches(sim: Any, alias: str) -> bool:
    try:
        assert_matches_upstream(sim, alias)
    except AssertionError:
        return False
    except DatabaseError:
        connections[alias].close()
        return False
    return True


def assert_history_exact(stack: Stack, sim: Any, alias: str, timeout: float) -> float:
    """Seconds until the stored history equals the upstream's (0 missing, every record as upstream shows it),
    then: 0 duplicated, and the derived data equal to a recomputation."""
    took = wait_for("the stored history equals the upstream's", lambda: matches(sim, alias), timeout,
                    stack.children)
    assert_nothing_extra(sim, alias)
    assert_derived_exact(alias)
    return took


def pages(stack: Stack) -> int:
    try:
        return int(stack.scalar("SELECT coalesce(sum(pages), 0) FROM deliveries_historywalk"))
    except psycopg.OperationalError:
        return -1


def test_postgres_restarted_during_ingestion(stack: Stack, make_simulator: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    sim = make_simulator(history_window_days=3)
    sim.world.faults.latency_ms = 150
    poller = stack.manage("poll_history", sim, "poll_history")
    wait_for("two pages stored", lambda: pages(stack) >= 2, 30, stack.children)

    before = stack.stored()
    restart = stack.postgres.restart()
    # Measured from the server being back: the pages stored before the restart stay, the one in flight is
    # rolled back and fetched again.
    resumed = wait_for("storing resumes", lambda: stack.stored() > before, 30, stack.children)
    sim.world.faults.latency_ms = 0

    with stack.django_alias() as alias:
        complete = assert_history_exact(stack, sim, alias, 30)
        # Records change upstream afterwards (retries, new deliveries): the running poller brings them in.
        sim.world.clock.advance(3 * 3600)
        updated = assert_history_exact(stack, sim, alias, 30)
    assert poller.alive(), poller.output()
    report(capsys, f"Postgres restart (pg_ctl restart -m fast, {restart:.1f} s) under poll_history: storing "
                   f"resumed {resumed:.1f} s after the server was back, "
                   f"history exact {complete:.1f} s later; changes upstream stored within {updated:.1f} s")



def assert_one_mail_per_incident(stack: Stack, sink: Any, timeout: float) -> int:
    """Once every opened incident's mail is out (none pending or being sent), one accepted mail per incident;
    and still one after the next alert sweep (ALERT_SWEEP_SECONDS=5) had its chance to send a copy."""

    def settled() -> bool:
        incidents = int(stack.scalar("SELECT count(*) FROM alerts_incident"))
        unsent = int(stack.scalar("SELECT count(*) FROM alerts_notification WHERE status IN ('pending', 'sending')"))
        return incidents > 0 and unsent == 0 and len(sink.messages) >= incidents

    wait_for("one mail per incident", settled, timeout, stack.children)
    time.sleep(6)
    incidents = int(stack.scalar("SELECT count(*) FROM alerts_incident"))
    opened = int(stack.scalar("SELECT count(*) FROM alerts_notification WHERE kind = 'opened' AND status = 'sent'"))
    per_incident = stack.scalar("SELECT max(n) FROM (SELECT count(*) AS n FROM alerts_notification "
                                "WHERE kind = 'opened' GROUP BY incident_id) AS counts")
    assert opened == incidents and per_incident == 1
    assert len(sink.messages) == incidents, [m["Subject"] for m in sink.messages]
    return incidents


@pytest.fixture
def sink() -> Iterator[Any]:
    with smtp_sink() as running:
        yield running


def mail_env(sink: Any) -> dict[str, str]:
    return {"ALERT_EMAILS": "ops@example.com", "EMAIL_URL": f"smtp://127.0.0.1:{sink.port}",
            "ALERT_SWEEP_SECONDS": "5", "ALERT_MAX_MAILS_PER_HOUR": "1000"}


def celery_worker(stack: Stack, sim: Any, name: str, **env: str) -> Any:
    return stack.celery(name, sim, "worker", "-Q", "polls,alerts,actions", "--concurrency", "2",
                        "--hostname", f"{name}@%h", "--loglevel", "WARNING", **env)


def celery_beat(stack: Stack, sim: Any, name: str, **env: str) -> Any:
    return stack.celery(name, sim, "beat", "--schedule", str(stack.logs / f"{name}-schedule"),
                        "--loglevel", "WARNING", **env)


def test_redis_restarted_during_ingestion(stack: Stack, make_simulator: Any, sink: Any,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sim = make_simulator(history_window_days=3, start=timezone.now())
    sim.world.faults.latency_ms = 150
    worker = celery_worker(stack, sim, "worker", **mail_env(sink))
    beat = celery_beat(stack, sim, "beat", **mail_env(sink))
    wait_for("two pages stored", lambda: pages(stack) >= 2, 40, stack.children)

    # Stopped with the lock held and polls queued, down for a second, back empty: no lock, no queue.
    outage = stack.redis.restart(down=1.0)
    before = stack.stored()
    resumed = wait_for("storing resumes", lambda: stack.stored() > before, 40, stack.children)
    sim.world.faults.latency_ms = 0

    with stack.django_alias() as alias:
        complete = assert_history_exact(stack, sim, alias, 40)
        sim.world.clock.advance(3 * 3600)
        updated = assert_history_exact(stack, sim, alias, 40)
    incidents = assert_one_mail_per_incident(stack, sink, 30)
    assert beat.restarts == 0, beat.output()
    # kombu 5.7 ends the worker ("Unrecoverable error" closing its channel with tasks unacknowledged) when the
    # broker goes away; its supervisor (systemd's Restart=on-failure) starts it again.
    assert worker.restarts <= 1, worker.output()
    report(capsys, f"Redis restart ({outage:.1f} s down, every key lost) under a Celery worker and beat: storing "
                   f"resumed {resumed:.1f} s after Redis was back (worker restarted by its supervisor "
                   f"{worker.restarts} time(s)), history exact {complete:.1f} s later; changes upstream stored "
                   f"within {updated:.1f} s; {incidents} incidents, one mail each")


def test_a_worker_killed_mid_page_and_restarted(stack: Stack, make_simulator: Any, sink: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Its history ends now, so its recent failures open incidents (the default rule "Failed deliveries").
    sim = make_simulator(history_window_days=3, start=timezone.now())
    sim.world.faults.latency_ms = 300
    worker = celery_worker(stack, sim, "worker", **mail_env(sink))
    celery_beat(stack, sim, "beat", **mail_env(sink))
    wait_for("two pages stored", lambda: pages(stack) >= 2, 40, stack.children)

    # SIGKILL to the worker and its pool while a page is in flight: no cleanup, the lock is left to its lease.
    # Its supervisor starts it again at once.
    worker.kill()
    before = stack.stored()
    resumed = wait_for("storing resumes", lambda: stack.stored() > before, 40, stack.children)
    assert worker.restarts == 1
    sim.world.faults.latency_ms = 0

    with stack.django_alias() as alias:
        complete = assert_history_exact(stack, sim, alias, 40)
    incidents = assert_one_mail_per_incident(stack, sink, 30)
    report(capsys, f"Celery worker SIGKILLed mid-page and restarted at once: storing resumed {resumed:.1f} s "
                   f"after the kill (LOCK_LEASE_SECONDS=3), history exact {complete:.1f} s later; "
                   f"{incidents} incidents, one mail each")


def test_two_workers_and_two_beats_at_once(stack: Stack, make_simulator: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import SIMULATOR_KEY

    sim = make_simulator(history_window_days=3)
    sim.world.faults.latency_ms = 20
    started = time.monotonic()
    # On a fresh database, all at once: each one races to create the default source, both beats send polls,
    # and a poll_history in a terminal polls too.
    for n in (1, 2):
        celery_worker(stack, sim, f"worker{n}")
        celery_beat(stack, sim, f"beat{n}")
    stack.manage("poll_history", sim, "poll_history")

    with stack.django_alias() as alias:
        complete = assert_history_exact(stack, sim, alias, 50)
        sim.world.clock.advance(3 * 3600)
        updated = assert_history_exact(stack, sim, alias, 40)
    assert stack.scalar("SELECT count(*) FROM deliveries_source") == 1
    assert all(child.restarts == 0 for child in stack.children), [c.output() for c in stack.children]
    server_log = stack.postgres.server.log.read_text()
    assert SIMULATOR_KEY not in server_log
    report(capsys, f"two workers, two beats and poll_history started at once on a fresh database: history "
                   f"exact {complete:.1f} s after the start ({time.monotonic() - started:.0f} s in all), changes "
                   f"stored within {updated:.1f} s, one source, each record once")


UPSTREAM_FAULTS = [
    ("429", {"rate_429": 1.0, "retry_after": 0.2}, "rate_limited"),
    ("5xx", {"rate_5xx": 1.0}, "upstream_error"),
    ("timeout", {"latency_ms": 2500}, "unreachable"),
    ("truncated JSON", {"truncate_rate": 1.0, "truncate_mode": "body"}, "bad_response"),
]


def test_the_upstream_failing_in_turn(stack: Stack, make_simulator: Any,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import SIMULATOR_KEY

    sim = make_simulator(history_window_days=2)
    # One retry: each fault is recorded after two attempts (a timeout costs UPSTREAM_READ_TIMEOUT each).
    poller = stack.manage("poll_history", sim, "poll_history", UPSTREAM_MAX_RETRIES="1")
    figures = []
    with stack.django_alias() as alias:
        assert_history_exact(stack, sim, alias, 40)
        for name, faults, kind in UPSTREAM_FAULTS:
            # New records and changed ones wait upstream while it fails.
            sim.world.clock.advance(3600)
            for knob, value in faults.items():
                setattr(sim.world.faults, knob, value)
            wait_for(f"{name}: the error recorded", lambda kind=kind: stack.error_kind() == kind, 30,
                     stack.children)
            for knob in faults:
                setattr(sim.world.faults, knob, getattr(type(sim.world.faults)(), knob))
            cleared = wait_for(f"{name}: the error cleared", lambda: stack.error_kind() == "", 30, stack.children)
            assert_history_exact(stack, sim, alias, 30)
            figures.append(f"{name} {cleared:.1f} s")

        # 401: the provider rotated the key. The source pauses until the operator sets the new one.
        sim.world.clock.advance(3600)
        sim.world.api_key = "rotated-key"
        wait_for("401: the rejected key recorded", lambda: stack.error_kind() == "rejected_key", 30,
                 stack.children)
        requests = sim.world.requests_served
        time.sleep(2)
        assert sim.world.requests_served == requests, "a rejected key is retried at every poll"
        poller.stop()
        changed = time.monotonic()
        stack.manage("poll_history-new-key", sim, "poll_history", MORALIS_API_KEY="rotated-key",
                     UPSTREAM_MAX_RETRIES="1")
        wait_for("401: the error cleared", lambda: stack.error_kind() == "", 30, stack.children)
        assert_history_exact(stack, sim, alias, 30)
        figures.append(f"401 {time.monotonic() - changed:.1f} s after the new key (a new poll_history's start "
                       "included)")
        assert "rotated-key" not in stack.postgres.server.log.read_text()
    assert SIMULATOR_KEY not in poller.output()
    report(capsys, "upstream faults one after another under poll_history, each lasting until its error was "
                   "recorded; polling resumed (error cleared, history exact) after: " + ", ".join(figures))
