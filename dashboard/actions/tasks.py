"""The worker side of actions at the provider: a thin wrapper around services.run_action.

Late acks and redelivery after a lost worker can only continue the same action: every replayed delivery is
claimed by a conditional UPDATE before its request goes out, and one left mid-request is re-read, not
re-sent. A per-action lock keeps two copies of the task from working the same action at once.
"""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings

from dashboard.actions import block_scan, services
from dashboard.locks import exclusive


@shared_task(
    name="dashboard.actions.tasks.run_action", bind=True, ignore_result=True, acks_late=True,
    reject_on_worker_lost=True, max_retries=None,
)
def run_action_task(self: object, action_id: int) -> None:
    # Stop well inside the soft time limit and continue in a new run, so progress is never lost to it.
    budget = max(5.0, float(settings.CELERY_TASK_SOFT_TIME_LIMIT) - 30.0)
    with exclusive(f"action:{action_id}") as held:
        if held is None:
            # Another copy works on it, or one whose worker died holds the lock until its lease runs out: look again
            # later rather than drop the action.
            if not services.is_finished(action_id):
                run_action_task.apply_async(args=[action_id], countdown=30)
            return
        outcome = services.run_action(action_id, deadline=time.monotonic() + budget)
    if not outcome.finished:
        run_action_task.apply_async(args=[action_id], countdown=outcome.retry_in)


@shared_task(
    name="dashboard.actions.tasks.run_block_scan", bind=True, ignore_result=True, acks_late=True,
    reject_on_worker_lost=True, max_retries=None,
)
def run_block_scan_task(self: object, scan_id: int) -> None:
    """A thin wrapper around block_scan.run_scan holding the scan's lease; a 429's Retry-After, tomorrow's budget
    or the time budget brings it back later, from the scan's cursor."""
    budget = max(5.0, float(settings.CELERY_TASK_SOFT_TIME_LIMIT) - 30.0)
    with exclusive(f"block-scan:{scan_id}") as held:
        if held is None:
            if not block_scan.is_finished(scan_id):
                run_block_scan_task.apply_async(args=[scan_id], countdown=30)
            return
        outcome = block_scan.run_scan(scan_id, deadline=time.monotonic() + budget)
    if not outcome.finished:
        run_block_scan_task.apply_async(args=[scan_id], countdown=outcome.retry_in)
