"""dashboard/replica.py in this process: the router's choices, the fall-back when the replica does not answer or
its reads fail midway, a streamed answer produced on the replica, and the lag banner's rule. The real replica
(paused replay, lag, a replica stopped and started) is in tests/replica/."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import RequestFactory

from dashboard import replica
from dashboard.alerts.models import Incident
from dashboard.deliveries.models import Delivery
from dashboard.replica import READS, REPLICA, ReplicaRead, ReplicaRouter, reading_replica, reads_replica
from dashboard.sources.models import Source
from tests.faults.stack import free_port


def reads(database: str, reason: str) -> float:
    return READS.labels(database=database, reason=reason)._value.get()


@contextlib.contextmanager
def replica_alias(**overrides: Any) -> Iterator[None]:
    """A `replica` alias in this process, as DATABASE_REPLICA_URL makes one."""
    connections.settings[REPLICA] = {**connections["default"].settings_dict, "CONN_MAX_AGE": 0, **overrides}
    replica._down_until = 0.0
    try:
        yield
    finally:
        connections[REPLICA].close()
        del connections.settings[REPLICA]
        with contextlib.suppress(AttributeError):
            delattr(connections._connections, REPLICA)
        replica._down_until = 0.0


@pytest.fixture
def answering_replica(django_db_blocker: Any) -> Iterator[None]:
    # The shared server's maintenance database: it answers the lag query (not in recovery: current).
    with django_db_blocker.unblock(), replica_alias(NAME="postgres"):
        yield


@pytest.fixture
def unreachable_replica(django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock(), replica_alias(HOST="127.0.0.1", PORT=str(free_port())):
        yield


def test_the_router_sends_only_history_reads_inside_a_marked_view_to_the_replica() -> None:
    router = ReplicaRouter()
    assert router.db_for_read(Delivery) == DEFAULT_DB_ALIAS
    with reading_replica():
        for model in (Delivery, Source, Incident):
            assert router.db_for_read(model) == REPLICA
            assert router.db_for_write(model) == DEFAULT_DB_ALIAS
        # Who is logged in must be read where the login was just written.
        assert router.db_for_read(User) == DEFAULT_DB_ALIAS
        assert router.db_for_read(Session) == DEFAULT_DB_ALIAS
    assert router.db_for_read(Delivery) == DEFAULT_DB_ALIAS
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "deliveries") is True
    assert router.allow_migrate(REPLICA, "deliveries") is False


def test_without_a_replica_a_marked_view_just_runs() -> None:
    seen: list[bool] = []

    @reads_replica
    def view(request: HttpRequest) -> HttpResponse:
        seen.append(replica._reading_replica.get())
        return HttpResponse("ok")

    request = RequestFactory().get("/")
    assert view(request).content == b"ok"
    assert seen == [False]
    assert replica.replica_notice(request) == {}


def test_a_current_replica_is_read_and_a_streamed_answer_is_produced_on_it(answering_replica: None) -> None:
    seen: list[bool] = []

    def chunks() -> Iterator[str]:
        for _ in range(3):
            yield "replica," if replica._reading_replica.get() else "primary,"

    @reads_replica
    def view(request: HttpRequest) -> StreamingHttpResponse:
        seen.append(replica._reading_replica.get())
        return StreamingHttpResponse(chunks())

    before = reads(REPLICA, "current")
    response = view(RequestFactory().get("/"))
    assert seen == [True]
    # The chunks are produced after the view returned, still on the replica.
    assert b"".join(response.streaming_content) == b"replica," * 3  # type: ignore[attr-defined]
    assert reads(REPLICA, "current") == before + 1


def test_a_replica_that_does_not_answer_sends_pages_to_the_primary_and_is_not_asked_again_at_once(
    unreachable_replica: None,
) -> None:
    seen: list[bool] = []

    @reads_replica
    def view(request: HttpRequest) -> HttpResponse:
        seen.append(replica._reading_replica.get())
        return HttpResponse("ok")

    before = reads("primary", "unreachable")
    for _ in range(2):
        request = RequestFactory().get("/")
        assert view(request).content == b"ok"
        assert replica.replica_notice(request) == {}
    assert seen == [False, False]
    assert reads("primary", "unreachable") == before + 2
    assert replica._down_until > 0


def test_reads_that_fail_on_the_replica_midway_are_done_again_on_the_primary(answering_replica: None) -> None:
    seen: list[bool] = []

    @reads_replica
    def view(request: HttpRequest) -> HttpResponse:
        seen.append(replica._reading_replica.get())
        if len(seen) == 1:
            raise OperationalError("canceling statement due to conflict with recovery")
        return HttpResponse("ok")

    before = reads("primary", "failed")
    assert view(RequestFactory().get("/")).content == b"ok"
    assert seen == [True, False]
    assert reads("primary", "failed") == before + 1


def test_the_banner_shows_a_lag_from_the_notice_threshold_on(settings: Any) -> None:
    settings.REPLICA_LAG_NOTICE_SECONDS = 5
    request = RequestFactory().get("/")
    for read, shown in (
        (ReplicaRead(REPLICA, "current", 4.4), {}),
        (ReplicaRead(REPLICA, "current", 5.2), {"replica_lag_seconds": 5}),
        (ReplicaRead("primary", "lag", 90.0), {}),
    ):
        request._replica_read = read  # type: ignore[attr-defined]
        assert replica.replica_notice(request) == shown
