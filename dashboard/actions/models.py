"""Actions at the provider — replays, stream status changes, re-sent blocks — as rows before requests.

An action is written as a row (who, what, the scope) when a user prepares it, confirmed by a conditional
UPDATE (so a double submit confirms once), and carried out by a worker that claims each delivery of a
replay with another conditional UPDATE before sending it (so a redelivered task, or two workers, never send
the same replay twice). The provider's answer is recorded on the row. Rows are never deleted (a database
trigger refuses it) and no page or admin form edits them: together they are the audit of every
state-changing request made to the provider.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.status import DeliveryStatus
from dashboard.sources.models import Source
from dashboard.visibility import ScopedManager, Visibility

# The permission that lets a user act at the provider (granted to Staff by the roles sync).
ACT_AT_PROVIDER = "actions.act_at_provider"


class ActionKind(models.TextChoices):
    REPLAY = "replay", "Replay deliveries"
    SET_STATUS = "set_status", "Set stream status"
    RESEND_BLOCK = "resend_block", "Re-send a block"
    # The missing blocks a block scan found, one item each.
    RESEND_BLOCKS = "resend_blocks", "Re-send missing blocks"


class ActionState(models.TextChoices):
    DRAFT = "draft", "Awaiting confirmation"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    # A replay some of whose deliveries the provider refused (or whose answers were lost).
    PARTIAL = "partial", "Partly done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    EXPIRED = "expired", "Not confirmed"


FINISHED = (
    ActionState.DONE, ActionState.PARTIAL, ActionState.FAILED, ActionState.CANCELLED, ActionState.EXPIRED
)


class ActionQuerySet(models.QuerySet["ProviderAction"]):
    def requested(self) -> ActionQuerySet:
        """Actions somebody confirmed: the audit (drafts are intentions, not requests)."""
        return self.exclude(state__in=[ActionState.DRAFT, ActionState.EXPIRED])

    def for_stream(self, stream_id: str) -> ActionQuerySet:
        return self.filter(stream_id=stream_id)


class ProviderAction(models.Model):
    kind = models.CharField(max_length=16, choices=ActionKind.choices)
    state = models.CharField(max_length=16, choices=ActionState.choices, default=ActionState.DRAFT)
    source = models.ForeignKey(Source, null=True, on_delete=models.SET_NULL, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept as text too: the audit outlives the user account.
    requested_by_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The stream acted on (every delivery of a bulk replay may span several: then empty).
    stream_id = models.CharField(max_length=64, blank=True)
    # What was asked, in words (the confirmation's sentence), and the list filter it came from.
    scope = models.TextField()
    filters = models.TextField(blank=True)
    # set_status: the status asked for, and the stream's status and message when the user confirmed.
    wanted_status = models.CharField(max_length=16, blank=True)
    status_before = models.CharField(max_length=32, blank=True)
    status_message_before = models.TextField(blank=True)
    # resend_block: the block.
    chain_id = models.CharField(max_length=32, blank=True)
    block_number = models.BigIntegerField(null=True, blank=True)
    target_count = models.PositiveIntegerField(default=0)
    # The provider's answer (single actions) or a summary (replays), and for a failure why.
    answer = models.TextField(blank=True)
    # The request went out and its answer was lost: set while the worker re-reads the state.
    sent_at = models.DateTimeField(null=True, blank=True)
    # resend_blocks: the scan whose missing blocks it re-sends.
    scan = models.ForeignKey("BlockScan", null=True, blank=True, on_delete=models.PROTECT, related_name="resends")

    objects = ScopedManager.from_queryset(ActionQuerySet)()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["stream_id", "-created_at"], name="action_stream_created"),
            models.Index(fields=["state"], name="action_state"),
        ]
        permissions = [
            ("act_at_provider", "Can replay deliveries and change stream status at the provider"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()} by {self.requested_by_name}"

    def get_absolute_url(self) -> str:
        return reverse("web:action", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED

    def confirm_deadline(self) -> datetime:
        return self.created_at + timedelta(minutes=settings.ACTION_CONFIRM_MINUTES)

    def can_be_confirmed(self, now: datetime | None = None) -> bool:
        return self.state == ActionState.DRAFT and (now or timezone.now()) < self.confirm_deadline()


class ItemState(models.TextChoices):
    PENDING = "pending", "Waiting"
    SENDING = "sending", "Sending"
    REPLAYED = "replayed", "Replayed"
    REFUSED = "refused", "Refused by the provider"
    # The request went out and its answer was lost, and the provider's logs do not show for certain that it
    # acted: never sent again by the worker, as a second request could be a second replay. A person decides.
    UNKNOWN = "unknown", "Answer lost: check and replay by hand if needed"
    SKIPPED = "skipped", "Not sent (cancelled)"


ITEM_DONE = (ItemState.REPLAYED, ItemState.REFUSED, ItemState.SKIPPED)


class ReplayItemQuerySet(models.QuerySet["ReplayItem"]):
    """The reads the pages make of replayed deliveries (the state machine itself is actions/services.py)."""

    def requested(self) -> ReplayItemQuerySet:
        """Items of actions somebody confirmed (a draft's items are intentions, not requests)."""
        return self.exclude(action__state__in=[ActionState.DRAFT, ActionState.EXPIRED])

    def of_delivery(self, delivery_id: Any) -> ReplayItemQuerySet:
        """Every replay of this delivery we asked for, newest first: part of its attempt history."""
        return self.filter(delivery_id=delivery_id).requested().select_related("action").order_by("-id")

    def counts(self) -> dict[str, int]:
        """Items per state, for the action's progress."""
        return dict(self.order_by().values_list("state").annotate(n=Count("id")).values_list("state", "n"))

    def delivered(self) -> ReplayItemQuerySet:
        """Items whose replay the provider made and delivered."""
        return self.filter(state=ItemState.REPLAYED, delivered=True)

    def recoveries(
        self, start: datetime | None, end: datetime | None, dimension: str, *, stream_id: str | None, tag: str | None
    ) -> list[tuple[str, int, float]]:
        """(stream id or tag, retries, seconds from first attempt to success) of the deliveries a replay
        delivered, dated in the window: exact times to success, where the schedule would only guess."""
        items = self.delivered().filter(answered_at__isnull=False)
        if start is not None:
            items = items.filter(delivery_date__gte=start)
        if end is not None:
            items = items.filter(delivery_date__lt=end)
        if stream_id:
            items = items.filter(stream_id=stream_id)
        firsts: dict[Any, tuple[int, datetime, datetime]] = {}
        for delivery_id, retries, date, answered in items.order_by("answered_at").values_list(
            "delivery_id", "retries_before", "delivery_date", "answered_at"
        )[:10_000]:
            if answered is not None and date is not None:
                firsts.setdefault(delivery_id, (retries, date, answered))
        deliveries = Delivery.objects.filter(pk__in=list(firsts), status=DeliveryStatus.DELIVERED)
        if tag:
            deliveries = deliveries.filter(tag=tag)
        keys = dict(deliveries.values_list("pk", dimension))
        return [
            (keys[pk], retries, (answered - date).total_seconds())
            for pk, (retries, date, answered) in firsts.items()
            if pk in keys
        ]


class ReplayItem(models.Model):
    """One delivery of a replay, or one missing block of a re-send (no delivery): claimed (pending -> sending)
    before its request goes out."""

    action = models.ForeignKey(ProviderAction, on_delete=models.PROTECT, related_name="items")
    # None for a re-sent block, which has no delivery.
    delivery_id = models.UUIDField(null=True, blank=True)
    stream_id = models.CharField(max_length=64)
    chain_id = models.CharField(max_length=32, blank=True)
    block_number = models.BigIntegerField(null=True, blank=True)
    # The record as we had it when the replay was prepared.
    delivery_date = models.DateTimeField(null=True, blank=True)
    retries_before = models.IntegerField(default=0)
    status_before = models.CharField(max_length=16)
    state = models.CharField(max_length=16, choices=ItemState.choices, default=ItemState.PENDING)
    # When our request went out: set by the same conditional UPDATE that claims the item, before the request
    # (cleared again when the provider refused it unseen: a 429, no connection). A lost answer is looked for
    # in the provider's logs from this moment on (actions/attempts.py).
    sent_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    # What the attempt did: True delivered, False failed again, None not known.
    delivered = models.BooleanField(null=True)
    answer = models.TextField(blank=True)
    # How many times its answer was lost and the provider's logs were read instead.
    rereads = models.PositiveSmallIntegerField(default=0)

    objects = ScopedManager.from_queryset(ReplayItemQuerySet)()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["action", "delivery_id"], name="replay_item_once"),
            models.UniqueConstraint(
                fields=["action", "stream_id", "chain_id", "block_number"], condition=models.Q(delivery_id=None),
                name="resend_item_once",
            ),
        ]
        indexes = [models.Index(fields=["delivery_id"], name="replay_item_delivery")]

    def __str__(self) -> str:
        return f"{self.delivery_id} {self.state}"


class ScanState(models.TextChoices):
    DRAFT = "draft", "Awaiting confirmation"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Previewing"
    # Waiting for the provider (a 429's Retry-After, an outage) or for tomorrow's budget.
    WAITING = "waiting", "Waiting"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    EXPIRED = "expired", "Not confirmed"


SCAN_LIVE = (ScanState.QUEUED, ScanState.RUNNING, ScanState.WAITING)
SCAN_FINISHED = (ScanState.DONE, ScanState.FAILED, ScanState.CANCELLED, ScanState.EXPIRED)


class BlockScan(models.Model):
    """Finding a window's missing blocks: each block of its range on each of the stream's chains previewed once
    with the stream's configuration (actions/block_scan.py). A row before any request, like an action: who asked,
    the ranges (`BlockScanChain`, each with its cursor), the previews made (`PreviewedBlock`)."""

    window = models.ForeignKey("deliveries.OutageWindow", on_delete=models.PROTECT, related_name="scans")
    source = models.ForeignKey(Source, null=True, on_delete=models.SET_NULL, related_name="+")
    stream_id = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=ScanState.choices, default=ScanState.DRAFT)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Blocks to preview (every chain's range), previewed so far, and those in which the stream matched something.
    planned = models.PositiveIntegerField(default=0)
    previewed = models.PositiveIntegerField(default=0)
    matched = models.PositiveIntegerField(default=0)
    # The stream's configuration and addresses as read when the scan started: every block is asked with the same.
    config = models.JSONField(null=True, blank=True)
    # What holds now, in words (waiting for what, why it failed, the summary).
    message = models.TextField(blank=True)

    objects = ScopedManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["window", "-created_at"], name="blockscan_window_created")]

    def __str__(self) -> str:
        return f"scan #{self.pk} of window {self.window_id} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in SCAN_FINISHED

    @property
    def percent(self) -> int:
        return int(100 * self.previewed / self.planned) if self.planned else 100

    def can_be_confirmed(self, now: datetime | None = None) -> bool:
        deadline = self.created_at + timedelta(minutes=settings.ACTION_CONFIRM_MINUTES)
        return self.state == ScanState.DRAFT and (now or timezone.now()) < deadline


class BlockScanChain(models.Model):
    """One chain's range of a scan and its cursor: `next_block` is the next block to preview, moved in the same
    transaction as the `PreviewedBlock` row of the block before it."""

    scan = models.ForeignKey(BlockScan, on_delete=models.PROTECT, related_name="chains")
    chain_id = models.CharField(max_length=32)
    first_block = models.BigIntegerField()
    last_block = models.BigIntegerField()
    next_block = models.BigIntegerField()
    # How the range was placed from block times, in words.
    placed_by = models.CharField(max_length=200, blank=True)
    # An audit's sampled blocks, ascending, within first_block..last_block; empty: every block of the range.
    sample = ArrayField(models.BigIntegerField(), default=list, blank=True)

    class Meta:
        ordering = ["chain_id"]
        constraints = [models.UniqueConstraint(fields=["scan", "chain_id"], name="blockscanchain_once")]

    def __str__(self) -> str:
        return f"{self.chain_id} {self.first_block}–{self.last_block}, next {self.next_block}"

    @property
    def blocks(self) -> int:
        return len(self.sample) if self.sample else self.last_block - self.first_block + 1

    def pending(self) -> list[int] | range:
        """The blocks still to preview, in order: from the cursor on, the sample's or the range's."""
        if self.sample:
            return [n for n in self.sample if n >= self.next_block]
        return range(self.next_block, self.last_block + 1)


def _by_scan(visibility: Visibility) -> Q:
    return Q(scan__stream_id__in=visibility.sorted_ids())


class PreviewedBlockQuerySet(models.QuerySet["PreviewedBlock"]):
    def since(self, moment: datetime) -> PreviewedBlockQuerySet:
        return self.filter(previewed_at__gte=moment)


class PreviewedBlock(models.Model):
    """One block previewed for a scan, and what the preview answered: written once (unique), in the transaction
    that moves its chain's cursor past it. The day's budget is counted from these rows."""

    scan = models.ForeignKey(BlockScan, on_delete=models.PROTECT, related_name="blocks")
    chain_id = models.CharField(max_length=32)
    block_number = models.BigIntegerField()
    # The stream matched something in it: it should have received a delivery.
    matched = models.BooleanField()
    records = models.IntegerField(default=0)
    block_time = models.DateTimeField(null=True, blank=True)
    previewed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedManager.from_queryset(PreviewedBlockQuerySet)()
    visible_to = staticmethod(_by_scan)

    class Meta:
        ordering = ["chain_id", "block_number"]
        constraints = [
            models.UniqueConstraint(fields=["scan", "chain_id", "block_number"], name="previewedblock_once"),
        ]
        indexes = [
            models.Index(fields=["previewed_at"], name="previewedblock_at"),
            models.Index(fields=["scan", "chain_id", "block_number"], condition=models.Q(matched=True),
                         name="previewedblock_matched"),
        ]

    def __str__(self) -> str:
        return f"{self.chain_id} {self.block_number} {'matched' if self.matched else 'nothing'}"


class PreviewBudget(models.Model):
    """The block previews asked of the provider on one UTC day, counted when each request is about to go out (a
    request whose answer was never recorded — a killed worker — cost the provider all the same): every scan and
    audit takes from it under a row lock (`block_scan.take_previews`), so concurrent runs together never ask more
    than BLOCK_PREVIEW_PER_DAY."""

    day = models.DateField(primary_key=True)
    spent = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.day}: {self.spent} previews"
