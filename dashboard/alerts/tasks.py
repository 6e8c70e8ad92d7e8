"""Celery tasks: thin wrappers around evaluate.py and the outbox that take ids."""

from __future__ import annotations

import logging
from datetime import datetime

from celery import shared_task
from django.db import transaction

from dashboard.alerts import evaluate, outbox

log = logging.getLogger(__name__)


def dispatch_due(now: datetime | None = None) -> None:
    """The one way messages are queued: once the transaction that wrote them commits, a send task for every
    row of every outbox that is due (new, or lost by its task or its sender). A row queued twice (two
    evaluators at once) is sent once, by the task that claims it under its lease."""

    def queue() -> None:
        for name, pk in outbox.due_messages(now):
            send_message_task.delay(name, pk)

    transaction.on_commit(queue)


@shared_task(name="dashboard.alerts.tasks.evaluate_alerts", ignore_result=True, expires=300)
def evaluate_alerts_task() -> None:
    """Run right after a poll stored new failures."""
    evaluate.evaluate_all()
    dispatch_due()


@shared_task(name="dashboard.alerts.tasks.sweep_alerts", ignore_result=True)
def sweep_alerts_task() -> None:
    evaluate.sweep()
    dispatch_due()


@shared_task(
    name="dashboard.alerts.tasks.send_message", bind=True, ignore_result=True, acks_late=True,
    reject_on_worker_lost=True, max_retries=outbox.MAX_SEND_ATTEMPTS,
)
def send_message_task(self, name: str, pk: int) -> str:  # type: ignore[no-untyped-def]
    try:
        outcome, followers = outbox.send_message(name, pk)
    except outbox.TransientSendError as exc:
        # Recorded on the row already; the countdown matches the row's next_attempt_at.
        attempts = self.request.retries + 1
        raise self.retry(exc=exc, countdown=outbox.retry_delay(attempts).total_seconds()) from exc
    for follower in followers:
        # A resolution to this channel waited for its opening; it may go now.
        send_message_task.delay(name, follower)
    return outcome
