"""The optional read replica (`DATABASE_REPLICA_URL`): which reads go to it, how far behind it is, and the
fall-back to the primary. Imports no app.

Pages that only read the stored history are marked `@reads_replica` (the dashboard pages, their live refresh
and the CSV export). While such a view runs, and while a streamed answer of it is produced, `ReplicaRouter`
sends reads of the history's tables (`REPLICA_APPS`) to the `replica` alias. Everything else reads the
primary: logins, sessions, permissions and login throttling (a user must see their own login at once),
every page that is not marked (actions and their progress, alerts, the admin, the lookups), the workers
and the commands. Every write goes to the primary.

Before a marked view runs, one query asks the replica how far behind it is (`replica_status`). When it does
not answer, or is more than `REPLICA_MAX_LAG_SECONDS` behind, the view reads the primary instead, and a
replica that did not answer is not asked again by this process for `RETRY_SECONDS`. A view whose reads fail
on the replica midway (it went away, or cancelled a query for a conflict with recovery) is run again on
the primary: the marked views only read, so running one twice is harmless. Each page counts where it read
(`READS`); a page read from a replica at least `REPLICA_LAG_NOTICE_SECONDS` behind shows a banner saying so.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.db.models import Model
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from prometheus_client import Counter

log = logging.getLogger(__name__)

REPLICA = "replica"
# The stored history and what is derived from it. Auth, sessions, content types, login throttling and
# anything added later stay on the primary unless listed here.
REPLICA_APPS = frozenset({"sources", "deliveries", "polling", "actions", "alerts"})
# After the replica failed to answer, this process reads the primary for this long before asking again, so a
# replica host that is down costs one connection timeout now and then, not one per page.
RETRY_SECONDS = 10.0

READS = Counter(
    "dashboard_replica_page_reads",
    "Pages marked to read the replica, by the database they read (replica, primary) and why: current (the "
    "replica within REPLICA_MAX_LAG_SECONDS), lag (further behind), unreachable (no answer, or not asked "
    "again yet after none), failed (its reads failed midway; the page was read again from the primary).",
    ["database", "reason"],
)

_reading_replica: ContextVar[bool] = ContextVar("reading_replica", default=False)
_down_until = 0.0
_REQUEST_ATTR = "_replica_read"

# The replica's own view of its lag: nothing received is left to replay, else the time since the last
# transaction it replayed was committed on the primary (an upper bound when the primary is idle). Not in
# recovery: a primary (the URL names one, or the replica was promoted), current by definition.
LAG_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN NOT pg_is_in_recovery() THEN 0
            WHEN pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() THEN 0
            ELSE greatest(0, extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()))
       END
"""


def configured() -> bool:
    return REPLICA in connections.settings


class ReplicaRouter:
    """Reads of the history's tables go to the replica inside `reading_replica()`; all else to the primary."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        if _reading_replica.get() and model._meta.app_label in REPLICA_APPS:
            return REPLICA
        # Never None: Django would then read where a related instance came from, the replica included.
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


@contextlib.contextmanager
def reading_replica() -> Iterator[None]:
    token = _reading_replica.set(True)
    try:
        yield
    finally:
        _reading_replica.reset(token)


@dataclass(frozen=True)
class ReplicaStatus:
    """What the replica answered: its lag in seconds (None when it did not answer, or cannot tell)."""

    ok: bool
    lag_seconds: float | None = None
    in_recovery: bool | None = None
    error: str = ""


def replica_status() -> ReplicaStatus:
    """One query on the replica; never raises."""
    try:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute(LAG_SQL)
            in_recovery, lag = cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means: read the primary
        with contextlib.suppress(Exception):
            connections[REPLICA].close()
        return ReplicaStatus(ok=False, error=type(exc).__name__)
    return ReplicaStatus(ok=True, lag_seconds=None if lag is None else float(lag), in_recovery=bool(in_recovery))


def status_details() -> dict[str, Any]:
    """For /healthz and /readyz: the replica's answer and whether pages read it now. A replica that is down or
    behind makes neither endpoint fail, since the pages then read the primary."""
    status = replica_status()
    current = status.lag_seconds is not None and status.lag_seconds <= settings.REPLICA_MAX_LAG_SECONDS
    return {
        "ok": status.ok,
        "in_recovery": status.in_recovery,
        "lag_seconds": None if status.lag_seconds is None else round(status.lag_seconds, 1),
        "max_lag_seconds": settings.REPLICA_MAX_LAG_SECONDS,
        "pages_read": "replica" if status.ok and current else "primary",
        "error": status.error,
    }


@dataclass(frozen=True)
class ReplicaRead:
    """Where a marked page read, and why."""

    database: str
    reason: str
    lag_seconds: float | None = None

    @property
    def on_replica(self) -> bool:
        return self.database == REPLICA


def _mark_down() -> None:
    global _down_until
    _down_until = time.monotonic() + RETRY_SECONDS


def choose_database() -> ReplicaRead:
    if time.monotonic() < _down_until:
        return ReplicaRead("primary", "unreachable")
    status = replica_status()
    if not status.ok:
        log.warning("read replica: no answer (%s); pages read the primary for %.0f s", status.error, RETRY_SECONDS)
        _mark_down()
        return ReplicaRead("primary", "unreachable")
    if status.lag_seconds is None or status.lag_seconds > settings.REPLICA_MAX_LAG_SECONDS:
        return ReplicaRead("primary", "lag", status.lag_seconds)
    return ReplicaRead(REPLICA, "current", status.lag_seconds)


View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def reads_replica(view: View) -> View:
    """Marks a view that only reads the stored history: its reads go to the replica when there is one that
    is current enough (see the module's docstring)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not configured():
            return view(request, *args, **kwargs)
        choice = choose_database()
        if not choice.on_replica:
            return _counted(request, choice, view, args, kwargs)
        try:
            with reading_replica():
                response = _counted(request, choice, view, args, kwargs)
        except (OperationalError, InterfaceError):
            log.warning("read replica: a page's reads failed on it; read again from the primary", exc_info=True)
            with contextlib.suppress(Exception):
                connections[REPLICA].close()
            _mark_down()
            return _counted(request, ReplicaRead("primary", "failed"), view, args, kwargs)
        if response.streaming:
            # A streamed answer (the CSV export) queries while it is sent, after the view returned.
            response.streaming_content = _on_replica(response.streaming_content)  # type: ignore[attr-defined]
        return response

    return wrapped  # type: ignore[return-value]


def _counted(
    request: HttpRequest, choice: ReplicaRead, view: Callable[..., HttpResponseBase], args: Any, kwargs: Any
) -> HttpResponseBase:
    setattr(request, _REQUEST_ATTR, choice)
    response = view(request, *args, **kwargs)
    READS.labels(database=choice.database, reason=choice.reason).inc()
    return response


def _on_replica(chunks: Iterable[bytes]) -> Iterator[bytes]:
    iterator = iter(chunks)
    while True:
        with reading_replica():
            chunk = next(iterator, None)
        if chunk is None:
            return
        yield chunk


def replica_notice(request: HttpRequest) -> dict[str, Any]:
    """Context processor: the replica's lag, for the banner of a page read from a replica that far behind."""
    read: ReplicaRead | None = getattr(request, _REQUEST_ATTR, None)
    if read is None or not read.on_replica or read.lag_seconds is None:
        return {}
    if read.lag_seconds < settings.REPLICA_LAG_NOTICE_SECONDS:
        return {}
    return {"replica_lag_seconds": round(read.lag_seconds)}
