"""Sync state of each source: what the last polls did, and whether anyone should be told."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from dashboard.deliveries.models import Source, SyncErrorKind
from dashboard.upstream import errors

# A key the upstream rejected is retried this rarely until it changes.
REJECTED_KEY_RETRY = timedelta(minutes=15)
# Longest wait after a 429 without Retry-After, and the cap on any Retry-After we honour.
RATE_LIMIT_DEFAULT_WAIT = timedelta(seconds=60)
RATE_LIMIT_MAX_WAIT = timedelta(hours=1)


def key_digest(api_key: str) -> str:
    """Identifies a key without storing it: enough to notice that the key was changed."""
    return hashlib.sha256(f"source-key:{api_key}".encode()).hexdigest()


def key_changed_since_rejection(source: Source) -> bool:
    return bool(source.rejected_key_digest) and source.rejected_key_digest != key_digest(source.api_key)


def lag(source: Source, now: datetime | None = None) -> timedelta | None:
    """How far the newest stored upstream record is behind now (None before the first record)."""
    if source.newest_upstream_date is None:
        return None
    return max(timedelta(0), (now or timezone.now()) - source.newest_upstream_date)


def record_success(source: Source, *, records: int, newest_date: datetime | None) -> None:
    now = timezone.now()
    fields = {
        "last_success_at": now,
        "consecutive_failures": 0,
        "last_error_kind": "",
        "last_error_message": "",
        "key_rejected_at": None,
        "rejected_key_digest": "",
        "backoff_until": None,
        "records_last_poll": records,
    }
    if newest_date is not None and (source.newest_upstream_date is None or newest_date > source.newest_upstream_date):
        fields["newest_upstream_date"] = newest_date
    Source.objects.filter(pk=source.pk).update(**fields)
    for name, value in fields.items():
        setattr(source, name, value)


def record_failure(source: Source, exc: Exception) -> None:
    now = timezone.now()
    backoff_until: datetime | None = None
    key_rejected_at = source.key_rejected_at
    rejected_digest = source.rejected_key_digest
    if isinstance(exc, errors.RejectedKey):
        kind = SyncErrorKind.REJECTED_KEY
        digest = key_digest(source.api_key)
        if digest != rejected_digest:
            key_rejected_at = None
        key_rejected_at = key_rejected_at or now
        rejected_digest = digest
        backoff_until = now + REJECTED_KEY_RETRY
    elif isinstance(exc, errors.RateLimited):
        kind = SyncErrorKind.RATE_LIMITED
        wait = RATE_LIMIT_DEFAULT_WAIT
        if exc.retry_after is not None and math.isfinite(exc.retry_after):
            # Capped before converting: timedelta overflows on absurd values.
            wait = timedelta(seconds=max(0.0, min(exc.retry_after, RATE_LIMIT_MAX_WAIT.total_seconds())))
        backoff_until = now + min(wait, RATE_LIMIT_MAX_WAIT)
    elif isinstance(exc, errors.Unreachable):
        kind = SyncErrorKind.UNREACHABLE
    elif isinstance(exc, errors.BadResponse):
        kind = SyncErrorKind.BAD_RESPONSE
    elif isinstance(exc, errors.UpstreamError):
        kind = SyncErrorKind.UPSTREAM_ERROR
    else:
        kind = SyncErrorKind.INTERNAL
    message = exc.message if isinstance(exc, errors.UpstreamError) else f"{type(exc).__name__}: {exc}"
    Source.objects.filter(pk=source.pk).update(
        last_error_at=now,
        last_error_kind=kind,
        last_error_message=message[:2000],
        consecutive_failures=F("consecutive_failures") + 1,
        key_rejected_at=key_rejected_at,
        rejected_key_digest=rejected_digest,
        backoff_until=backoff_until,
    )
    source.refresh_from_db()


def is_backing_off(source: Source, now: datetime | None = None) -> bool:
    return source.backoff_until is not None and source.backoff_until > (now or timezone.now())


@dataclass(frozen=True)
class SyncProblem:
    source: Source
    summary: str


def stale_after() -> timedelta:
    return timedelta(seconds=max(120, settings.POLL_INTERVAL_SECONDS * 8))


def problem_of(source: Source, now: datetime | None = None) -> SyncProblem | None:
    now = now or timezone.now()
    if source.key_rejected_at is not None:
        return SyncProblem(
            source,
            f"the upstream rejected the API key of source “{source.name}” ({source.last_error_message[:200]}); "
            f"retried every {int(REJECTED_KEY_RETRY.total_seconds() // 60)} minutes until the key is changed",
        )
    if source.consecutive_failures >= 2 and source.last_error_kind:
        label = SyncErrorKind(source.last_error_kind).label
        return SyncProblem(
            source, f"polling of “{source.name}” is failing ({label}: {source.last_error_message[:200]})"
        )
    reference = source.last_success_at or source.created_at
    if now - reference > stale_after():
        return SyncProblem(source, f"no successful poll of “{source.name}” since {reference:%Y-%m-%d %H:%M} UTC")
    return None


def sources_needing_attention() -> list[SyncProblem]:
    now = timezone.now()
    problems = (problem_of(source, now) for source in Source.objects.filter(enabled=True))
    return [p for p in problems if p is not None]
