"""The provider projects we read (an API key and its base URLs) and the sync state the poller keeps on them.

The table was created by the deliveries app and keeps its name (`deliveries_source`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from dashboard.encryption import EncryptedTextField
from dashboard.text import visible
from dashboard.times import iso_minutes
from dashboard.upstream import errors
from dashboard.upstream.client import scrub_key

# A key the upstream rejected is retried this rarely until it changes.
REJECTED_KEY_RETRY = timedelta(minutes=15)
# Longest wait after a 429 without Retry-After, and the cap on any Retry-After we honour.
RATE_LIMIT_DEFAULT_WAIT = timedelta(seconds=60)
RATE_LIMIT_MAX_WAIT = timedelta(hours=1)


class SyncErrorKind(models.TextChoices):
    REJECTED_KEY = "rejected_key", "API key rejected"
    RATE_LIMITED = "rate_limited", "Rate limited"
    UNREACHABLE = "unreachable", "Upstream unreachable"
    UPSTREAM_ERROR = "upstream_error", "Upstream error"
    BAD_RESPONSE = "bad_response", "Malformed upstream response"
    INTERNAL = "internal", "Internal error"


def key_digest(api_key: str) -> str:
    """Identifies a key without storing it: enough to notice that the key was changed."""
    return hashlib.sha256(f"source-key:{api_key}".encode()).hexdigest()


def stale_after() -> timedelta:
    """How long without a successful poll before a source counts as stale."""
    return timedelta(seconds=max(120, settings.POLL_INTERVAL_SECONDS * 8))


@dataclass(frozen=True)
class SyncProblem:
    source: Source
    # For the signed-in pages: the upstream's own words included, their invisible characters made visible.
    summary: str
    # The same without the upstream's words, for the health endpoints anyone can read: a server's text may
    # carry what no scrubbing foresaw (the key in yet another encoding, internal host names).
    public_summary: str


class SourceQuerySet(models.QuerySet["Source"]):
    def enabled(self) -> SourceQuerySet:
        return self.filter(enabled=True)

    def needing_attention(self, now: datetime | None = None) -> list[SyncProblem]:
        """Enabled sources whose polling is failing or stale, for the banner and the health check."""
        now = now or timezone.now()
        problems = (source.problem(now) for source in self.enabled())
        return [p for p in problems if p is not None]


class Source(models.Model):
    """One upstream project: an API key and the base URLs it is used against."""

    name = models.CharField(max_length=100, unique=True)
    # Write-only: forms and pages never render it back, not even masked. Encrypted in the database
    # (dashboard/encryption.py); the attribute is the plain key.
    api_key = EncryptedTextField(blank=True)
    streams_base_url = models.URLField(max_length=300)
    evm_base_url = models.URLField(max_length=300)
    aptos_mainnet_base_url = models.URLField(max_length=300)
    aptos_testnet_base_url = models.URLField(max_length=300)
    enabled = models.BooleanField(default=True)
    # The source made from the MORALIS_* environment variables.
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    # Sync state, written by the poller through the record_* methods below.
    last_poll_started_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_error_kind = models.CharField(max_length=32, choices=SyncErrorKind.choices, blank=True)
    last_error_message = models.TextField(blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    key_rejected_at = models.DateTimeField(null=True, blank=True)
    backoff_until = models.DateTimeField(null=True, blank=True)
    newest_upstream_date = models.DateTimeField(null=True, blank=True)
    records_last_poll = models.PositiveIntegerField(default=0)
    last_revisit_at = models.DateTimeField(null=True, blank=True)
    # Every upstream record dated at or before this instant has been stored: a head poll walks down to it
    # and no further. Null until a first complete walk of the history.
    synced_through = models.DateTimeField(null=True, blank=True)
    # Digest of the key the upstream rejected, so a changed key (from any form or the environment) is
    # tried at once instead of waiting out the rejected-key backoff. Never the key itself.
    rejected_key_digest = models.CharField(max_length=64, blank=True)
    # The provider's stream list and stats, read on the poll schedule every STREAM_SYNC_SECONDS.
    streams_synced_at = models.DateTimeField(null=True, blank=True)
    streams_sync_error = models.TextField(blank=True)

    objects = SourceQuerySet.as_manager()

    class Meta:
        db_table = "deliveries_source"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("admin:sources_source_change", args=[self.pk])

    # --- The key ----------------------------------------------------------------------------------------

    def set_api_key(self, api_key: str) -> list[str]:
        """Replace the key (unsaved); a new key deserves a fresh try at once. Returns the changed fields."""
        if api_key == self.api_key:
            return []
        self.api_key = api_key
        self.key_rejected_at = None
        self.backoff_until = None
        return ["api_key", "key_rejected_at", "backoff_until"]

    def key_changed_since_rejection(self) -> bool:
        return bool(self.rejected_key_digest) and self.rejected_key_digest != key_digest(self.api_key)

    # --- What the poller records ------------------------------------------------------------------------

    def _update(self, **fields: object) -> None:
        Source.objects.filter(pk=self.pk).update(**fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def record_poll_started(self, now: datetime | None = None) -> None:
        self._update(last_poll_started_at=now or timezone.now())

    def record_revisit(self, at: datetime) -> None:
        self._update(last_revisit_at=at)

    def record_synced_through(self, top: datetime) -> None:
        """Everything at or before `top` is stored; the mark only ever moves forward."""
        Source.objects.filter(pk=self.pk).filter(Q(synced_through__isnull=True) | Q(synced_through__lt=top)).update(
            synced_through=top
        )
        if self.synced_through is None or top > self.synced_through:
            self.synced_through = top

    def record_success(self, *, records: int, newest_date: datetime | None) -> None:
        fields: dict[str, object] = {
            "last_success_at": timezone.now(),
            "consecutive_failures": 0,
            "last_error_kind": "",
            "last_error_message": "",
            "key_rejected_at": None,
            "rejected_key_digest": "",
            "backoff_until": None,
            "records_last_poll": records,
        }
        if newest_date is not None and (self.newest_upstream_date is None or newest_date > self.newest_upstream_date):
            fields["newest_upstream_date"] = newest_date
        self._update(**fields)

    def record_failure(self, exc: Exception) -> None:
        now = timezone.now()
        backoff_until: datetime | None = None
        key_rejected_at = self.key_rejected_at
        rejected_digest = self.rejected_key_digest
        if isinstance(exc, errors.RejectedKey):
            kind = SyncErrorKind.REJECTED_KEY
            digest = key_digest(self.api_key)
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
        # The transport scrubs its own texts; any other exception's text is scrubbed here, before it is stored
        # for the pages and the banner.
        message = scrub_key(message, self.api_key)
        Source.objects.filter(pk=self.pk).update(
            last_error_at=now,
            last_error_kind=kind,
            last_error_message=message[:2000],
            consecutive_failures=F("consecutive_failures") + 1,
            key_rejected_at=key_rejected_at,
            rejected_key_digest=rejected_digest,
            backoff_until=backoff_until,
        )
        self.refresh_from_db()

    def streams_sync_due(self, now: datetime | None = None) -> bool:
        if self.streams_synced_at is None:
            return True
        every = timedelta(seconds=settings.STREAM_SYNC_SECONDS)
        return (now or timezone.now()) - self.streams_synced_at >= every

    def record_streams_sync(self, *, error: str = "", now: datetime | None = None) -> None:
        """A sync of the provider's streams ran; `error` says what of it failed (empty when it all worked)."""
        error = scrub_key(error, self.api_key)[:2000]
        self._update(streams_synced_at=now or timezone.now(), streams_sync_error=error)

    # --- What the pages and alerts read -----------------------------------------------------------------

    def lag(self, now: datetime | None = None) -> timedelta | None:
        """How far the newest stored upstream record is behind now (None before the first record)."""
        if self.newest_upstream_date is None:
            return None
        return max(timedelta(0), (now or timezone.now()) - self.newest_upstream_date)

    def is_backing_off(self, now: datetime | None = None) -> bool:
        return self.backoff_until is not None and self.backoff_until > (now or timezone.now())

    def should_poll(self, now: datetime | None = None) -> bool:
        """Enabled, not backing off; a rejected key that has since been changed is tried at once."""
        if not self.enabled:
            return False
        if self.key_rejected_at is not None and self.key_changed_since_rejection():
            return True
        return not self.is_backing_off(now)

    def problem(self, now: datetime | None = None) -> SyncProblem | None:
        """Why nobody should trust this source's data right now, in one sentence; None when healthy."""
        now = now or timezone.now()
        if self.key_rejected_at is not None:
            minutes = int(REJECTED_KEY_RETRY.total_seconds() // 60)
            retried = f"retried every {minutes} minutes until the key is changed"
            rejected = f"the upstream rejected the API key of source “{visible(self.name)}”"
            said = visible(self.last_error_message[:200])
            return SyncProblem(self, f"{rejected} ({said}); {retried}", f"{rejected}; {retried}")
        if self.consecutive_failures >= 2 and self.last_error_kind:
            label = SyncErrorKind(self.last_error_kind).label
            failing = f"polling of “{visible(self.name)}” is failing"
            said = visible(self.last_error_message[:200])
            return SyncProblem(self, f"{failing} ({label}: {said})", f"{failing} ({label})")
        reference = self.last_success_at or self.created_at
        if now - reference > stale_after():
            stale = f"no successful poll of “{visible(self.name)}” since {iso_minutes(reference)}"
            return SyncProblem(self, stale, stale)
        return None
