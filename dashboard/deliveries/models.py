"""Stored delivery history and what is derived from it at ingest time.

The upstream keeps at most seven days of history and edits records in place while it retries;
these tables keep the full history, keyed by the upstream record id, with the derived columns
(status, error group, search keys) that let pages avoid reading payloads.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q

from dashboard.deliveries.querysets import DeliveryQuerySet, HourlyRollupQuerySet


class SyncErrorKind(models.TextChoices):
    REJECTED_KEY = "rejected_key", "API key rejected"
    RATE_LIMITED = "rate_limited", "Rate limited"
    UNREACHABLE = "unreachable", "Upstream unreachable"
    UPSTREAM_ERROR = "upstream_error", "Upstream error"
    BAD_RESPONSE = "bad_response", "Malformed upstream response"
    INTERNAL = "internal", "Internal error"


class Source(models.Model):
    """One upstream project: an API key and the base URLs it is used against."""

    name = models.CharField(max_length=100, unique=True)
    # Write-only: forms and pages never render it back, not even masked.
    api_key = models.CharField(max_length=512, blank=True)
    streams_base_url = models.URLField(max_length=300)
    evm_base_url = models.URLField(max_length=300)
    aptos_mainnet_base_url = models.URLField(max_length=300)
    aptos_testnet_base_url = models.URLField(max_length=300)
    enabled = models.BooleanField(default=True)
    # The source made from the MORALIS_* environment variables.
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    # Sync state, written by the poller.
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

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class WalkKind(models.TextChoices):
    HEAD = "head", "Head poll"
    REVISIT = "revisit", "Retry-window revisit"
    BACKFILL = "backfill", "Backfill"


class HistoryWalk(models.Model):
    """Checkpoint of one walk through the upstream history, newest to oldest, page by page.

    The cursor is saved in the same transaction as the page it follows, so a walk that is killed resumes
    at the first page it had not stored, and never re-fetches one it had.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="walks")
    kind = models.CharField(max_length=16, choices=WalkKind.choices)
    # Cursor of the next page to fetch; empty means the newest page (nothing fetched yet).
    cursor = models.TextField(blank=True)
    # Date of the newest record when the walk began; becomes the source's synced_through once it completes.
    top_date = models.DateTimeField(null=True, blank=True)
    # The walk is complete once it reaches records older than this (null: the end of the history).
    stop_before = models.DateTimeField(null=True, blank=True)
    pages = models.PositiveIntegerField(default=0)
    records = models.PositiveIntegerField(default=0)
    upstream_total = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "kind"], name="walk_source_kind")]

    def __str__(self) -> str:
        return f"{self.kind} walk of {self.source_id}"

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


class Stream(models.Model):
    """One upstream stream as seen in its deliveries: the streams page reads this, not the deliveries."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="streams")
    stream_id = models.CharField(max_length=64)
    # Tag of the newest delivery seen.
    tag = models.CharField(max_length=255, blank=True)
    webhook_urls = ArrayField(models.CharField(max_length=2048), default=list, blank=True)
    chain_ids = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    first_delivery_at = models.DateTimeField()
    last_delivery_at = models.DateTimeField()

    class Meta:
        ordering = ["stream_id"]
        constraints = [models.UniqueConstraint(fields=["source", "stream_id"], name="stream_source_stream")]

    def __str__(self) -> str:
        return self.tag or self.stream_id


class ErrorGroup(models.Model):
    """All error messages that share one template once their variable parts are masked."""

    fingerprint = models.CharField(max_length=64, unique=True)
    template = models.TextField()
    # Dates of the oldest and newest stored delivery whose current error falls in this group.
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    # Stored deliveries whose current error message falls in this group; kept exact at every write.
    delivery_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return self.template


class DeliveryStatus(models.TextChoices):
    DELIVERED = "delivered", "Delivered"
    RETRYING = "retrying", "Retrying"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    """One upstream history record: a webhook delivery of one block to one URL."""

    id = models.UUIDField(primary_key=True)
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="deliveries")
    date = models.DateTimeField()
    stream_id = models.CharField(max_length=64)
    tag = models.CharField(max_length=255, blank=True)
    webhook_url = models.CharField(max_length=2048)
    chain_id = models.CharField(max_length=32, blank=True)
    confirmed = models.BooleanField(null=True)
    block_number = models.BigIntegerField(null=True, blank=True)
    records = models.IntegerField(default=0)
    retries = models.IntegerField(default=0)
    error_message = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    error_group = models.ForeignKey(
        ErrorGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    # Lower-cased, kind-prefixed keys ("tx:0x…", "addr:0x…", "topic:0x…", "block:123") extracted from the
    # payload so that searches use a GIN index and never read payloads.
    search_keys = ArrayField(models.CharField(max_length=80), default=list, blank=True)
    tiny_payload = models.JSONField(default=dict)
    payload = models.JSONField(null=True, blank=True)
    # Digest of the upstream record as received; an unchanged record is never rewritten.
    record_hash = models.CharField(max_length=64)
    first_seen_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["-date", "-id"], name="delivery_date_id"),
            models.Index(fields=["stream_id", "date"], include=["status"], name="delivery_stream_date"),
            models.Index(fields=["tag", "date"], name="delivery_tag_date"),
            models.Index(fields=["webhook_url", "date"], name="delivery_url_date"),
            models.Index(fields=["error_group", "date"], name="delivery_group_date"),
            models.Index(
                fields=["date"], condition=~Q(status="delivered"), name="delivery_failed_date"
            ),
            models.Index(fields=["block_number"], name="delivery_block"),
            GinIndex(fields=["search_keys"], name="delivery_search_keys"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id} {self.date:%Y-%m-%d %H:%M:%S} {self.status}"

    @property
    def is_failure(self) -> bool:
        return self.status != DeliveryStatus.DELIVERED


class HourlyRollup(models.Model):
    """Delivery counts per hour and dimension, recomputed exactly for every hour and stream an ingest touches.

    Kept for ROLLUP_RETENTION_DAYS, longer than the deliveries themselves.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    stream_id = models.CharField(max_length=64)
    tag = models.CharField(max_length=255, blank=True)
    webhook_url = models.CharField(max_length=2048)
    chain_id = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    error_group = models.ForeignKey(ErrorGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    retries = models.IntegerField()
    deliveries = models.PositiveIntegerField()

    objects = HourlyRollupQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["hour"], name="rollup_hour"),
            models.Index(fields=["stream_id", "hour"], name="rollup_stream_hour"),
            models.Index(fields=["tag", "hour"], name="rollup_tag_hour"),
            models.Index(fields=["error_group", "hour"], name="rollup_group_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id} {self.hour:%Y-%m-%d %H:00} {self.status} ×{self.deliveries}"
