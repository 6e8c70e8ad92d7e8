"""The outbox: how every outgoing message — a mail, a chat message, a page, a signed webhook — is sent once.

A message is a row (`OutboxMessage`: a `Notification` for a mail, a `ChannelMessage` for a channel) written
in the transaction of what it reports. From there one path sends them all:

1. **Dispatch** (`dispatch_due`): after commit, one send task per row that is due — new and due, waiting out
   nothing, or lost (its task never ran, or its sender died).
2. **Lease**: the sender takes the row's Redis lease (`dashboard.locks`) before its claim and keeps it, renewed
   by a heartbeat, until the row says `sent`. A row `sending` without a live lease holder had a sender that
   died; the next sweep finds it (`lost`), not minutes later.
3. **Accepted marker**: if the service already accepted the message (a marker in Redis written right after
   its answer), the row is recorded `sent` and nothing is sent again.
4. **Claim**: a conditional UPDATE `pending -> sending` (or a `sending` row whose sender is gone); only the
   worker whose UPDATE matched sends. The table's `gate` may hold the row back first (the hourly mail cap, a
   resolution waiting for its opening, a disabled channel).
5. **Send** through the row's `Transport`, which only formats and sends (`dashboard.alerts.transports`).
6. **Record**: accepted -> the marker, then `sent` on the row, riding out a database restart; refused ->
   `pending` with backoff (`retry_delay`) while the failure is transient and attempts remain, else `failed`.

A guarantee proved for one table or transport holds for all of them: this module is the only one that claims,
leases, marks or records a send.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, TypeVar

import redis
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from dashboard.alerts.models import ChannelMessage, Notification, NotificationStatus, OutboxMessage
from dashboard.alerts.transports import SendFailed, Transport
from dashboard.locks import exclusive, is_held, redis_client

log = logging.getLogger(__name__)

# Sends are attempted this many times (the first try and its retries) before the row is marked failed.
MAX_SEND_ATTEMPTS = 6
# A pending row whose next attempt is this overdue lost its task (a broker restart): the sweep queues it again.
LOST_TASK_AFTER = timedelta(minutes=2)
# How long the marker that the service accepted a message is kept (longer than any retry or sweep).
ACCEPTED_MARKER_TTL = 14 * 86400
# How long a sender keeps trying to record "sent" on the row when the database is away (a restart): the
# message is never sent again, so the write must not be lost to one.
RECORD_SENT_PATIENCE = 300.0
# A live sender is done with its transport within this (every transport's timeouts stay below it). A row
# `sending` is taken for lost only once its claim is older, and its lease has no holder: a lease that vanished
# with a Redis restart while its sender still waits for the service's answer does not hand the row to another.
SEND_DEADLINE = timedelta(seconds=45)

M = TypeVar("M", bound=OutboxMessage)


class TransientSendError(Exception):
    """The send failed in a way worth retrying; recorded on the row already, with its next attempt."""


@dataclass(frozen=True)
class Hold:
    """What a gate does instead of letting a row be claimed: the fields to write on it."""

    status: str
    error: str = ""
    next_attempt_at: datetime | None = None


def retry_delay(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempts - 1)))


class Outbox(Generic[M]):
    """One table of outgoing messages. Subclasses say which rows are theirs and how each is carried."""

    name: ClassVar[str]
    model: type[M]
    # Claims of this table are serialised by this advisory lock (the mail cap counts across workers).
    claim_lock: ClassVar[int | None] = None

    # --- What a table says -------------------------------------------------------------------------------

    def rows(self) -> Any:
        return self.model._default_manager.all()

    def gate(self, row: M, now: datetime) -> Hold | None:
        """Called inside the claim's transaction: a Hold keeps the row from being sent now."""
        return None

    def transport(self, row: M) -> Transport[M]:
        raise NotImplementedError

    def describe(self, row: M) -> str:
        return str(row)

    def on_sent(self, row: M, now: datetime) -> list[int]:
        """After a row was recorded sent: ids of this table's rows that may go now (a waiting resolution)."""
        return []

    def on_attempt(self, row: M, now: datetime, *, ok: bool, result: str) -> None:
        """After each attempt, for the table's own bookkeeping (a channel's last attempt)."""

    # --- Finding work -------------------------------------------------------------------------------------

    def due(self, now: datetime | None = None) -> list[int]:
        """Rows that need a send task: new and due, or lost (their task never ran, or their sender died)."""
        now = now or timezone.now()
        fresh = Q(status=NotificationStatus.PENDING, attempts=0, next_attempt_at__lte=now)
        return sorted(
            set(self.rows().filter(fresh).values_list("pk", flat=True)) | set(self.lost(now)),
        )

    def lost(self, now: datetime | None = None) -> list[int]:
        """Rows whose send task never ran (overdue past LOST_TASK_AFTER), and rows `sending` whose sender is
        gone: claimed longer ago than any live send takes, and no holder of their lease."""
        now = now or timezone.now()
        found = self.model._default_manager.filter(
            Q(status=NotificationStatus.PENDING, next_attempt_at__lt=now - LOST_TASK_AFTER)
            | Q(status=NotificationStatus.SENDING, claimed_at__lt=now - SEND_DEADLINE)
        )
        return [
            row.pk
            for row in found.only("pk", "status", "claimed_at")
            if row.status != NotificationStatus.SENDING or not self._sender_alive(row)
        ]

    def _sender_alive(self, row: M) -> bool:
        try:
            return is_held(row.lease_name())
        except redis.RedisError:
            # Unknown: leave it; the claim itself needs the lease, so nothing is sent twice either way.
            return False

    # --- Sending ------------------------------------------------------------------------------------------

    def claimable(self, now: datetime) -> Q:
        """Rows a sender holding the lease may take: due pending rows, and rows `sending` whose sender is
        gone (the lease is ours, so nobody else is sending it) and whose claim is older than a live send."""
        return Q(status=NotificationStatus.PENDING, next_attempt_at__lte=now) | Q(
            status=NotificationStatus.SENDING, claimed_at__lt=now - SEND_DEADLINE
        )

    def claim(self, pk: int, now: datetime) -> M | None:
        """Take the row for sending; None if it is not ours to send (done, not due, held by the gate)."""
        claimable = self.claimable(now)
        with transaction.atomic():
            if self.claim_lock is not None:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [self.claim_lock])
            row = self.rows().filter(claimable, pk=pk).first()
            if row is None:
                return None
            hold = self.gate(row, now)
            if hold is not None:
                self.rows().filter(claimable, pk=pk).update(
                    status=hold.status, error=hold.error, next_attempt_at=hold.next_attempt_at
                )
                return None
            # The compare-and-set: only the worker whose UPDATE matched sends.
            if not self.rows().filter(claimable, pk=pk).update(
                status=NotificationStatus.SENDING, claimed_at=now, attempts=F("attempts") + 1
            ):
                return None
        row.refresh_from_db()
        return row  # type: ignore[no-any-return]

    def accepted(self, row: M) -> bool:
        """The service accepted this message (the marker written right after its answer), whatever the row says."""
        try:
            return bool(redis_client().exists(row.accepted_key()))
        except redis.RedisError:
            return False

    def _mark_accepted(self, row: M) -> None:
        try:
            redis_client().set(row.accepted_key(), "1", ex=ACCEPTED_MARKER_TTL)
        except redis.RedisError as exc:
            log.warning("%s %s: could not mark it accepted in Redis: %s", self.name, row.pk, exc)

    def _record_sent(self, pk: int, now: datetime) -> None:
        deadline = time.monotonic() + RECORD_SENT_PATIENCE
        while True:
            try:
                self.rows().filter(pk=pk).update(
                    status=NotificationStatus.SENT, sent_at=now, error="", next_attempt_at=None
                )
                return
            except (OperationalError, InterfaceError) as exc:
                if time.monotonic() > deadline or connection.in_atomic_block:
                    raise
                log.warning("%s %s: sent, recording it waits for the database: %s", self.name, pk, exc)
                connection.close()
                time.sleep(1.0)

    def _status(self, pk: int) -> str:
        return self.rows().filter(pk=pk).values_list("status", flat=True).first() or "missing"

    def send(self, pk: int, now: datetime | None = None) -> str:
        """Send one row and record the outcome; TransientSendError asks the caller for a retry later."""
        now = now or timezone.now()
        row = self.rows().filter(pk=pk).first()
        if row is None:
            return "missing"
        with exclusive(row.lease_name()) as held:
            if held is None:
                # Its live sender has it.
                return NotificationStatus.SENDING
            row.refresh_from_db(fields=["status"])
            if row.status == NotificationStatus.SENT:
                return NotificationStatus.SENT
            if self.accepted(row):
                # Accepted by a sender that died before it could write the row: recorded, never sent again.
                self._record_sent(pk, now)
                return NotificationStatus.SENT
            claimed = self.claim(pk, now)
            if claimed is None:
                return self._status(pk)
            transport = self.transport(claimed)
            try:
                transport.send(claimed)
            except Exception as exc:  # noqa: BLE001 - every failure is recorded on the row, none is lost silently
                self._record_failure(claimed, transport, exc, now)
                if isinstance(exc, SendFailed) and exc.transient and claimed.attempts < MAX_SEND_ATTEMPTS:
                    raise TransientSendError(claimed.error) from exc
                return NotificationStatus.FAILED
            self._mark_accepted(claimed)
            self._record_sent(pk, now)
        try:
            self.on_attempt(claimed, now, ok=True, result=f"accepted: {self.describe(claimed)}")
        except (OperationalError, InterfaceError) as exc:
            log.warning("%s %s: sent; its bookkeeping was not written: %s", self.name, pk, exc)
        log.info("%s %s sent: %s", self.name, pk, self.describe(claimed))
        return NotificationStatus.SENT

    def _record_failure(self, row: M, transport: Transport[M], exc: Exception, now: datetime) -> None:
        text = str(exc) if isinstance(exc, SendFailed) else f"{type(exc).__name__}: {exc}"
        error = transport.scrub(text)[:2000]
        retry = isinstance(exc, SendFailed) and exc.transient and row.attempts < MAX_SEND_ATTEMPTS
        next_attempt_at = now + retry_delay(row.attempts) if retry else None
        self.rows().filter(pk=row.pk, status=NotificationStatus.SENDING).update(
            status=NotificationStatus.PENDING if retry else NotificationStatus.FAILED,
            error=error,
            next_attempt_at=next_attempt_at,
        )
        row.error, row.next_attempt_at = error, next_attempt_at
        self.on_attempt(row, now, ok=False, result=error)
        log.warning("%s %s: attempt %d failed: %s", self.name, row.pk, row.attempts, error)


_OUTBOXES: dict[str, Outbox[Any]] = {}


def register(outbox: Outbox[Any]) -> Outbox[Any]:
    _OUTBOXES[outbox.name] = outbox
    return outbox


def outboxes() -> list[Outbox[Any]]:
    # The tables register themselves on import (mail.py, channels.py); importing them here keeps the list whole
    # for any caller.
    from dashboard.alerts import channels, mail  # noqa: F401

    return list(_OUTBOXES.values())


def outbox(name: str) -> Outbox[Any]:
    outboxes()
    return _OUTBOXES[name]


def outbox_of(row: OutboxMessage) -> Outbox[Any]:
    if isinstance(row, Notification):
        return outbox("mail")
    if isinstance(row, ChannelMessage):
        return outbox("channel")
    raise TypeError(f"no outbox for {type(row).__name__}")


def due_messages(now: datetime | None = None) -> list[tuple[str, int]]:
    """Every table's due rows, as (outbox name, id)."""
    now = now or timezone.now()
    return [(box.name, pk) for box in outboxes() for pk in box.due(now)]


def send_message(name: str, pk: int, now: datetime | None = None) -> tuple[str, list[int]]:
    """Send one row of one table: its outcome, and the ids of that table's rows that may go right after."""
    box = outbox(name)
    outcome = box.send(pk, now)
    followers: list[int] = []
    if outcome == NotificationStatus.SENT:
        row = box.rows().filter(pk=pk).first()
        if row is not None:
            followers = box.on_sent(row, now or timezone.now())
    return outcome, followers


def send_due(now: datetime | None = None) -> Iterable[tuple[str, int, str]]:
    """Send everything due, in this process (the `sendalerts` command): (outbox, id, outcome) as they go."""
    queue = due_messages(now)
    while queue:
        name, pk = queue.pop(0)
        try:
            outcome, followers = send_message(name, pk, now)
        except TransientSendError as exc:
            outcome, followers = f"will retry ({exc})", []
        queue += [(name, f) for f in followers if (name, f) not in queue]
        yield name, pk, outcome
