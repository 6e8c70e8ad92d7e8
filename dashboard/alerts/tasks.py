"""Celery tasks: thin wrappers around evaluate.py and mail.py that take ids."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial

from celery import shared_task
from django.db import transaction

from dashboard.alerts import channels, evaluate, mail

log = logging.getLogger(__name__)


def dispatch(notification_ids: Iterable[int]) -> None:
    """Queue one send task per mail once the rows that describe them are committed."""
    for notification_id in notification_ids:
        transaction.on_commit(partial(send_notification.delay, notification_id))


def dispatch_channel_deliveries(delivery_ids: Iterable[int]) -> None:
    """Queue one send task per channel message once its row is committed."""
    for delivery_id in delivery_ids:
        transaction.on_commit(partial(send_channel_delivery.delay, delivery_id))


def dispatch_due_channel_deliveries() -> None:
    # Queried after the transitions were written, in their transaction when there is one; a row queued twice
    # (two evaluators at once) is sent once, by the task that claims it.
    transaction.on_commit(lambda: dispatch_channel_deliveries(channels.to_dispatch()))


@shared_task(ignore_result=True, expires=300)
def evaluate_alerts() -> None:
    """Run right after a poll stored new failures."""
    dispatch(evaluate.evaluate_all())
    dispatch_due_channel_deliveries()


@shared_task(ignore_result=True)
def sweep_alerts() -> None:
    dispatch(evaluate.sweep())
    dispatch_due_channel_deliveries()


@shared_task(bind=True, ignore_result=True, acks_late=True, max_retries=mail.MAX_SEND_ATTEMPTS)
def send_notification(self, notification_id: int) -> str:  # type: ignore[no-untyped-def]
    try:
        return mail.send_notification(notification_id)
    except mail.TransientSendError as exc:
        # Recorded on the row already; the countdown matches the row's next_attempt_at.
        attempts = self.request.retries + 1
        raise self.retry(exc=exc, countdown=mail.retry_delay(attempts).total_seconds()) from exc


@shared_task(bind=True, ignore_result=True, acks_late=True, max_retries=mail.MAX_SEND_ATTEMPTS)
def send_channel_delivery(self, delivery_id: int) -> str:  # type: ignore[no-untyped-def]
    try:
        outcome = channels.send_delivery(delivery_id)
    except mail.TransientSendError as exc:
        attempts = self.request.retries + 1
        raise self.retry(exc=exc, countdown=mail.retry_delay(attempts).total_seconds()) from exc
    waiting = channels.waiting_resolution(delivery_id)
    if waiting is not None:
        # The resolution to this channel waited for its opening; it may go now.
        send_channel_delivery.delay(waiting)
    return outcome
