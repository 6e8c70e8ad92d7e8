"""Celery tasks: thin wrappers that take ids and call the plain functions in jobs.py and retention.py.

Every task is idempotent (a poll stores by upstream id, retention deletes by date), so the late acks and
redelivery after a lost worker configured in settings can only repeat harmless work. A duplicate beat, or a
task redelivered while the first copy still runs, finds the per-source lock taken and does nothing.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from dashboard.deliveries import retention
from dashboard.locks import exclusive
from dashboard.polling import jobs
from dashboard.polling.walks import PollResult
from dashboard.sources.defaults import ensure_default_source
from dashboard.sources.models import Source

log = logging.getLogger(__name__)


def _fresh_connection() -> None:
    """Drop a connection left broken (e.g. by a database restart) so this task opens a new one.

    Inside a transaction (a test's, or a caller's) the connection is in use and stays."""
    if not connection.in_atomic_block:
        close_old_connections()


@shared_task(name="dashboard.polling.tasks.poll_all_sources", ignore_result=True)
def poll_all_sources_task() -> None:
    _fresh_connection()
    ensure_default_source()
    for source_id in Source.objects.enabled().values_list("id", flat=True):
        # A queued poll older than two intervals is pointless: a newer one follows.
        poll_source_task.apply_async(args=[source_id], expires=float(settings.POLL_INTERVAL_SECONDS * 2))


@shared_task(name="dashboard.polling.tasks.poll_source", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def poll_source_task(source_id: int) -> PollResult | None:
    _fresh_connection()
    try:
        return _poll_source(source_id)
    except DatabaseError:
        log.exception("source %s: database error during poll; the next run starts on a new connection", source_id)
        if not connection.in_atomic_block:
            connection.close()
        return None


def _poll_source(source_id: int) -> PollResult | None:
    source = Source.objects.filter(pk=source_id).first()
    if source is None:
        return None
    run = jobs.poll_source(source)
    if run.skipped:
        log.info("%s", run.summary)
    return run.result


@shared_task(
    name="dashboard.polling.tasks.enforce_retention", ignore_result=True, acks_late=True, reject_on_worker_lost=True
)
def enforce_retention_task() -> None:
    _fresh_connection()
    with exclusive("retention") as held:
        if held is None:
            return
        retention.enforce_retention()
