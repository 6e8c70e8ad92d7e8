"""Failure behaviour against the simulator's fault knobs, on real Postgres and Redis."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection, connections
from django.utils import timezone

from dashboard.deliveries.models import Delivery
from dashboard.locks import exclusive, redis_client
from dashboard.polling import walks as poll_module
from dashboard.polling.jobs import source_lock_name
from dashboard.polling.tasks import poll_source_task
from dashboard.polling.walks import poll, poll_head
from dashboard.sources.models import Source
from dashboard.upstream import errors
from tests.checks import (
    assert_derived_exact,
    assert_matches_upstream,
    server_conninfo,
    truth,
)
from tests.factories import source_for


@pytest.mark.django_db
def test_a_rejected_key_pauses_polling_until_the_key_changes(sim: Any, sim_source: Source) -> None:
    sim_source.api_key = "revoked-key"
    sim_source.save()

    poll_source_task.apply(args=[sim_source.pk])

    sim_source.refresh_from_db()
    assert sim_source.key_rejected_at is not None
    assert sim_source.last_error_kind == "rejected_key"
    assert "Token is invalid format" in sim_source.last_error_message
    assert "revoked-key" not in sim_source.last_error_message
    problem = sim_source.problem()
    assert problem is not None and "rejected the API key" in problem.summary
    assert not sim_source.should_poll()
    requests = sim.world.requests_served
    poll_source_task.apply(args=[sim_source.pk])
    assert sim.world.requests_served == requests, "a rejected key is not retried at every beat"

    # Someone enters the right key (admin form, environment): polling resumes at once.
    sim_source.api_key = sim.world.api_key
    sim_source.save(update_fields=["api_key"])
    assert sim_source.should_poll()
    poll_source_task.apply(args=[sim_source.pk])

    sim_source.refresh_from_db()
    assert sim_source.key_rejected_at is None and sim_source.consecutive_failures == 0
    assert sim_source.problem() is None
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_429_waits_as_retry_after_says(sim: Any, sim_source: Source, settings: Any) -> None:
    settings.UPSTREAM_MAX_RETRIES = 2
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 0.4

    started = time.monotonic()
    with pytest.raises(errors.RateLimited):
        poll_head(sim_source)

    # Two retries, each after the 0.4 s the upstream asked for.
    assert time.monotonic() - started >= 0.8
    sim_source.refresh_from_db()
    assert sim_source.last_error_kind == "rate_limited"
    assert Delivery.objects.count() == 0


@pytest.mark.django_db
def test_a_long_retry_after_backs_the_source_off(sim: Any, sim_source: Source) -> None:
    sim.world.faults.rate_429 = 1.0
    sim.world.faults.retry_after = 120

    poll_source_task.apply(args=[sim_source.pk])

    sim_source.refresh_from_db()
    wait = sim_source.backoff_until - timezone.now()
    assert timedelta(seconds=100) < wait <= timedelta(seconds=120)
    requests = sim.world.requests_served
    poll_source_task.apply(args=[sim_source.pk])
    assert sim.world.requests_served == requests

    sim.world.faults.rate_429 = 0.0
    Source.objects.filter(pk=sim_source.pk).update(backoff_until=timezone.now() - timedelta(seconds=1))
    poll_source_task.apply(args=[sim_source.pk])
    assert_matches_upstream(sim)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "faults",
    [
        {"rate_5xx": 0.3},
        {"truncate_rate": 0.3, "truncate_mode": "connection"},
        {"truncate_rate": 0.3, "truncate_mode": "body"},
        {"rate_429": 0.3, "retry_after": 0.05},
    ],
    ids=["5xx", "truncated-connection", "truncated-body", "429"],
)
def test_transient_faults_are_retried_and_the_history_is_complete(
    sim: Any, sim_source: Source, settings: Any, faults: dict[str, Any]
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 8
    for name, value in faults.items():
        setattr(sim.world.faults, name, value)

    poll(sim_source)

    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("faults", "kind"),
    [
        ({"rate_5xx": 1.0}, "upstream_error"),
        ({"truncate_rate": 1.0, "truncate_mode": "body"}, "bad_response"),
        ({"latency_ms": 2500}, "unreachable"),
    ],
    ids=["5xx", "truncated", "timeout"],
)
def test_a_persistent_fault_writes_nothing_and_the_next_run_completes(
    sim: Any, sim_source: Source, settings: Any, faults: dict[str, Any], kind: str
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 1
    settings.UPSTREAM_READ_TIMEOUT = 1
    poll_head(sim_source)
    sim.world.clock.advance(6 * 3600)
    count = Delivery.objects.count()
    for name, value in faults.items():
        setattr(sim.world.faults, name, value)

    with pytest.raises(errors.UpstreamError):
        poll_head(sim_source)
    with pytest.raises(errors.UpstreamError):
        poll_head(sim_source)

    assert Delivery.objects.count() == count
    sim_source.refresh_from_db()
    assert sim_source.last_error_kind == kind
    assert sim_source.consecutive_failures == 2
    assert any(p.source.pk == sim_source.pk for p in Source.objects.needing_attention())

    for name in faults:
        setattr(sim.world.faults, name, type(getattr(sim.world.faults, name))())
    sim.world.faults.truncate_mode = "connection"
    # Older records changed meanwhile (retries): the revisit, due now, brings them up to date.
    Source.objects.filter(pk=sim_source.pk).update(last_revisit_at=None)
    sim_source.refresh_from_db()
    assert poll(sim_source).revisited

    assert_matches_upstream(sim)
    assert_derived_exact()
    sim_source.refresh_from_db()
    assert sim_source.consecutive_failures == 0 and sim_source.last_error_kind == ""


def _in_thread(target: Any, *args: Any, errors: list[BaseException] | None = None) -> threading.Thread:
    def run() -> None:
        try:
            target(*args)
        except BaseException as exc:
            if errors is None:
                raise
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_two_workers_polling_at_once_store_each_record_once(make_simulator: Any) -> None:
    sim = make_simulator()
    sim.world.faults.latency_ms = 20
    source = source_for(sim)

    errors: list[BaseException] = []
    threads = [_in_thread(poll_source_task.apply, [source.pk], errors=errors) for _ in range(2)]
    # And two polls that bypass the lock altogether (e.g. a poll and a backfill of the same upstream).
    threads += [_in_thread(poll_head, Source.objects.get(pk=source.pk), errors=errors) for _ in range(2)]
    for thread in threads:
        thread.join(60)

    assert errors == []

    assert Delivery.objects.count() == len(truth(sim))
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db(transaction=True)
def test_a_second_task_finds_the_lock_taken_and_does_nothing(make_simulator: Any) -> None:
    sim = make_simulator()
    source = source_for(sim)
    with exclusive(source_lock_name(source.pk)) as held:
        assert held is not None
        poll_source_task.apply(args=[source.pk])
        assert sim.world.requests_served == 0
    poll_source_task.apply(args=[source.pk])
    assert_matches_upstream(sim)


def test_a_lock_whose_holder_died_expires() -> None:
    name = "test-expiry"
    dead = redis_client().lock(f"lock:{name}", timeout=1)
    assert dead.acquire(blocking=False)  # never released: its holder "died"
    with exclusive(name, lease=5) as held:
        assert held is None
    time.sleep(1.2)
    with exclusive(name, lease=5) as held:
        assert held is not None


@pytest.mark.django_db(transaction=True)
def test_a_dropped_database_connection_does_not_wedge_the_next_run(
    make_simulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = make_simulator()
    source = source_for(sim)
    original = poll_module.fetch_history_page
    calls = {"n": 0}

    def fetch_then_restart_postgres(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            # What a Postgres restart does to the worker: its server process goes away mid-walk. The fetch runs
            # in the walk's reader thread, which holds no connection: the walker's is found by its database.
            with psycopg.connect(server_conninfo(), autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    [connection.settings_dict["NAME"]],
                )
        return original(*args, **kwargs)

    monkeypatch.setattr(poll_module, "fetch_history_page", fetch_then_restart_postgres)
    assert poll_source_task.apply(args=[source.pk]).result is None
    monkeypatch.setattr(poll_module, "fetch_history_page", original)

    result = poll_source_task.apply(args=[source.pk]).result

    assert result is not None and result.complete
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db(transaction=True)
def test_redis_dropping_its_connections_does_not_wedge_polling(make_simulator: Any) -> None:
    sim = make_simulator()
    source = source_for(sim)
    poll_source_task.apply(args=[source.pk])
    # What a Redis restart does: every client connection is cut.
    redis_client().client_kill_filter(_type="normal", skipme=False)

    sim.world.clock.advance(3600)
    Source.objects.filter(pk=source.pk).update(last_revisit_at=None)
    result = poll_source_task.apply(args=[source.pk]).result

    assert result is not None and result.stored.inserted > 0
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_redis_unreachable_fails_the_run_and_the_next_one_works(
    sim: Any, sim_source: Source, settings: Any
) -> None:
    good = settings.REDIS_URL
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    redis_client.cache_clear()
    with pytest.raises(Exception, match="Connection|connect"):
        poll_source_task.apply(args=[sim_source.pk], throw=True)
    settings.REDIS_URL = good
    redis_client.cache_clear()

    poll_source_task.apply(args=[sim_source.pk])

    assert_matches_upstream(sim)
