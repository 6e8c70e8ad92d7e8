"""The worker side of actions at the provider: a thin wrapper around services.run_action.

Late acks and redelivery after a lost worker can only continue the same action: every replayed delivery is
claimed by a conditional UPDATE before its request goes out, and one left mid-request is re-read, not
re-sent. A per-action lock keeps two copies of the task from working the same action at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.conf import settings

from dashboard.actions import audit, block_scan, services
from dashboard.locks import exclusive


def _run_leased(
    task: Any, lock_name: str, item_id: int, run: Callable[..., Any], is_finished: Callable[[int], bool]
) -> None:
    """Run one action or scan under its lease, stopping well inside the soft time limit; whatever is left
    (a held lease, a 429's Retry-After, tomorrow's budget, the time budget) goes on in a later run of `task`."""
    budget = max(5.0, float(settings.CELERY_TASK_SOFT_TIME_LIMIT) - 30.0)
    with exclusive(lock_name) as held:
        if held is None:
            # Another copy works on it, or one whose worker died holds the lock until its lease runs out: look again
            # later rather than drop it.
            if not is_finished(item_id):
                task.apply_async(args=[item_id], countdown=30)
            return
        outcome = run(item_id, deadline=time.monotonic() + budget)
    if not outcome.finished:
        task.apply_async(args=[item_id], countdown=outcome.retry_in)


@shared_task(
    name="dashboard.actions.tasks.run_action", bind=True, ignore_result=True, acks_late=True,
    reject_on_worker_lost=True, max_retries=None,
)
def run_action_task(self: object, action_id: int) -> None:
    _run_leased(run_action_task, f"action:{action_id}", action_id, services.run_action, services.is_finished)


@shared_task(
    name="dashboard.actions.tasks.run_block_scan", bind=True, ignore_result=True, acks_late=True,
    reject_on_worker_lost=True, max_retries=None,
)
def run_block_scan_task(self: object, scan_id: int) -> None:
    """A thin wrapper around block_scan.run_scan holding the scan's lease."""
    _run_leased(run_block_scan_task, f"block-scan:{scan_id}", scan_id, block_scan.run_scan, block_scan.is_finished)


@shared_task(name="dashboard.actions.tasks.audit_completeness", ignore_result=True)
def audit_completeness_task() -> None:
    """Beat's hourly run of audit.plan_audits: the day's audits made once (a unique row per stream and day, and one
    planner at a time under its lock), each carried out by run_block_scan_task under its scan's lease."""
    with exclusive("completeness-audit") as held:
        if held is not None:
            audit.plan_audits(queue=run_block_scan_task.delay)
