"""Checkpoints of the walks through a source's upstream history.

The table was created by the deliveries app and keeps its name (`deliveries_historywalk`).
"""

from __future__ import annotations

from django.db import models

from dashboard.sources.models import Source


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
        db_table = "deliveries_historywalk"
        constraints = [models.UniqueConstraint(fields=["source", "kind"], name="walk_source_kind")]

    def __str__(self) -> str:
        return f"{self.kind} walk of {self.source_id}"

    @property
    def finished(self) -> bool:
        return self.finished_at is not None
