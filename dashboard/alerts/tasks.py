"""Celery tasks: thin wrappers around evaluate.py and mail.py that take ids."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial

from celery import shared_task
from django.db import transaction

from dashboard.alerts import evaluate, mail

log = logging.getLogger(__name__)


def dispatch(notification_ids: Iterable[int]) -> None:
    """Queue one send task per mail once the rows that describe them are committed."""
    for notification_id in notification_ids:
        transaction.on_commit(partial(send_notification.delay, notification_id))


@shared_task(ignore_result=True, expires=300)
def evaluate_alerts() -> None:
    """Run right after a poll stored new failures."""
    dispatch(evaluate.evaluate_all())


@shared_task(ignore_result=True)
def sweep_alerts() -> None:
    dispatch(evaluate.sweep())


@shared_task(bind=True, ignore_result=True, acks_late=True, max_retries=mail.MAX_SEND_ATTEMPTS)
def send_notification(self, notification_id: int) -> str:  # type: ignore[no-untyped-def]
    try:
        return mail.send_notification(notification_id)
    except mail.TransientSendError as exc:
        # Recorded on the row already; the countdown matches the row's next_attempt_at.
        attempts = self.request.retries + 1
        raise self.retry(exc=exc, countdown=mail.retry_delay(attempts).total_seconds()) from exc
