"""Alert rules, the incidents they open and resolve, and every mail sent (or not) because of them.

The pattern is healthchecks' Flip/Notification: an incident row is written only when a rule starts or
stops holding, each transition writes one Notification row in the same transaction, and a mail is sent
only by the worker that claims that row with a conditional UPDATE. Re-polls, retries and concurrent
evaluators can therefore never produce a second mail for the same transition.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.functions import RandomUUID
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse

from dashboard.deliveries.models import Delivery, DeliveryQuerySet
from dashboard.deliveries.scopes import scope_filter
from dashboard.encryption import register_column
from dashboard.text import visible
from dashboard.visibility import ScopedManager, Visibility


class Scope(models.TextChoices):
    ALL = "all", "Everything"
    STREAM = "stream", "One stream"
    TAG = "tag", "One tag"
    WEBHOOK_URL = "webhook_url", "One webhook URL"


class Condition(models.TextChoices):
    ANY_FAILURE = "any_failure", "Any failed delivery"
    FAILURE_RATE = "failure_rate", "Failure rate above a threshold"
    CONSECUTIVE = "consecutive", "Consecutive failed deliveries"
    ERROR_STATE_RISK = "error_state_risk", "Provider error-state risk (modelled success rate)"
    POLLER_STALE = "poller_stale", "Our poller is stale (dead-man's switch)"
    PROVIDER_ERROR_STATE = "provider_error_state", "Stream in error or terminated at the provider (actual)"
    CONFIRMATION_GAP = "confirmation_gap", (
        "Confirmation gap (confirmed delivery missing after finality, or failing while the unconfirmed one was "
        "delivered)"
    )
    LATENCY_P95 = "latency_p95", "p95 processing latency above a threshold"
    QUIET_STREAM = "quiet_stream", "Quiet stream (improbably few deliveries for its own history)"
    MISSING_BLOCKS = "missing_blocks", "Missing blocks (blocks the stream should have received, with no delivery)"
    SLO_BURN_FAST = "slo_burn_fast", "SLO burn rate, fast (1 h and 5 min both at 14.4× the budget rate)"
    SLO_BURN_SLOW = "slo_burn_slow", "SLO burn rate, slow (6 h and 30 min both at 6× the budget rate)"


class Digest(models.TextChoices):
    OFF = "off", "No digest"
    HOURLY = "hourly", "Hourly"
    DAILY = "daily", "Daily"


DIGEST_PERIODS = {Digest.HOURLY: timedelta(hours=1), Digest.DAILY: timedelta(days=1)}
# Mails the hourly cap held back go out in a digest at most this long after the previous one.
HELD_DIGEST_PERIOD = timedelta(hours=1)


def _rule_visible(visibility: Visibility) -> Q:
    """Rules over everything, and those naming a stream, tag or URL the viewer sees."""
    return (
        Q(scope=Scope.ALL)
        | Q(scope=Scope.STREAM, scope_value__in=visibility.sorted_ids())
        | Q(scope=Scope.TAG, scope_value__in=sorted(visibility.tags))
        | Q(scope=Scope.WEBHOOK_URL, scope_value__in=sorted(visibility.urls))
    )


class AlertRule(models.Model):
    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.ALL)
    scope_value = models.CharField(
        max_length=2048, blank=True, help_text="The stream id, tag or webhook URL the scope names."
    )
    condition = models.CharField(max_length=24, choices=Condition.choices, default=Condition.ANY_FAILURE)
    window_minutes = models.PositiveIntegerField(
        default=15,
        help_text="Any failure / failure rate / confirmation gap: how far back deliveries count (by delivery "
        "date). A confirmation gap shows only after the chain's finality, so give it hours.",
    )
    threshold_percent = models.PositiveSmallIntegerField(
        default=50,
        help_text="Failure rate: alert above this share of failed deliveries. "
        "Error-state risk: alert when the modelled success rate falls below this (the provider stops at 70).",
    )
    min_deliveries = models.PositiveIntegerField(
        default=10, help_text="Failure rate: fewer deliveries than this in the window never alert."
    )
    latency_seconds = models.PositiveIntegerField(
        default=60,
        help_text="Latency p95: alert when the p95 of the unconfirmed deliveries' processing latency (first "
        "attempt minus block time) over the window is above this many seconds.",
    )
    quiet_probability = models.FloatField(
        default=0.001,
        validators=[MinValueValidator(1e-12), MaxValueValidator(0.5)],
        help_text="Quiet stream: alert when seeing so few deliveries, against what the stream's own history "
        "expects for these hours of the week, is less probable than this.",
    )
    consecutive_failures = models.PositiveIntegerField(
        default=5, help_text="Consecutive: this many newest deliveries all failed."
    )
    stale_minutes = models.PositiveIntegerField(
        default=10, help_text="Poller stale: no successful poll of a source for this long."
    )
    recipients = models.TextField(
        blank=True, help_text="Comma- or newline-separated addresses; empty sends to ALERT_EMAILS."
    )
    grace_minutes = models.PositiveIntegerField(
        default=10, help_text="An incident resolves only once the condition has been clear this long."
    )
    cooldown_minutes = models.PositiveIntegerField(
        default=30, help_text="After an incident resolves, the same target does not open a new one this soon."
    )
    digest = models.CharField(
        max_length=8,
        choices=Digest.choices,
        default=Digest.OFF,
        help_text="Also mail a digest of what is still failing. Mails held back by the hourly cap "
        "always go out in the next hourly digest.",
    )
    muted_until = models.DateTimeField(null=True, blank=True)
    channels: models.ManyToManyField[Channel, Any] = models.ManyToManyField(
        "Channel",
        blank=True,
        related_name="rules",
        help_text="Also notify these channels (Slack, Teams, PagerDuty, a webhook…) of openings and resolutions.",
    )
    digest_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager()
    visible_to = staticmethod(_rule_visible)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return visible(self.name)

    def recipient_list(self) -> list[str]:
        own = [a.strip() for a in self.recipients.replace("\n", ",").split(",") if a.strip()]
        return own or list(settings.ALERT_EMAILS)

    def is_muted(self, now: datetime) -> bool:
        return self.muted_until is not None and self.muted_until > now

    @property
    def grace(self) -> timedelta:
        return timedelta(minutes=self.grace_minutes)

    @property
    def cooldown(self) -> timedelta:
        return timedelta(minutes=self.cooldown_minutes)

    def describe_condition(self) -> str:
        if self.condition == Condition.ANY_FAILURE:
            return f"any failed delivery in the last {self.window_minutes} min"
        if self.condition == Condition.FAILURE_RATE:
            return (
                f"more than {self.threshold_percent} % failed over {self.window_minutes} min "
                f"(at least {self.min_deliveries} deliveries)"
            )
        if self.condition == Condition.CONSECUTIVE:
            return f"the newest {self.consecutive_failures} deliveries all failed"
        if self.condition == Condition.ERROR_STATE_RISK:
            return f"modelled provider success rate below {self.threshold_percent} % (error state below 70 %)"
        if self.condition == Condition.PROVIDER_ERROR_STATE:
            return "the provider has the stream in error or terminated (its own status, synced with the poll)"
        if self.condition == Condition.CONFIRMATION_GAP:
            return (
                f"a block of the last {self.window_minutes} min whose confirmed delivery is missing after the "
                "chain's finality, or failing while its unconfirmed delivery went through"
            )
        if self.condition == Condition.LATENCY_P95:
            return (
                f"p95 processing latency of unconfirmed deliveries above {self.latency_seconds} s over "
                f"{self.window_minutes} min (at least {self.min_deliveries} deliveries)"
            )
        if self.condition == Condition.MISSING_BLOCKS:
            return (
                f"blocks a completeness audit or a block scan previewed in the last {self.window_minutes} min that the "
                "stream matched, with no delivery stored (cleared once they are re-sent and polled)"
            )
        if self.condition == Condition.QUIET_STREAM:
            return (
                f"improbably few deliveries for the stream's own history (probability below {self.quiet_probability:g}"
                ", Poisson on its hour-of-week means)"
            )
        if self.condition in (Condition.SLO_BURN_FAST, Condition.SLO_BURN_SLOW):
            pair = "1 h and 5 min at 14.4×" if self.condition == Condition.SLO_BURN_FAST else "6 h and 30 min at 6×"
            return (
                f"the delivery or latency objective's error budget burning over {pair} its budget rate (at least "
                f"{self.min_deliveries} deliveries in the longer window)"
            )
        return f"no successful poll for {self.stale_minutes} min"

    def scope_filter(self) -> tuple[str, str] | None:
        """The rule's scope as (column, value): the deliveries' (and streams') column it names — `stream_id`,
        `tag` or `webhook_url` — and the value; None for everything. Every condition narrows by this."""
        return scope_filter(self.scope, self.scope_value) if self.condition != Condition.POLLER_STALE else None

    def describe_scope(self) -> str:
        if self.scope == Scope.ALL or self.condition == Condition.POLLER_STALE:
            return "everything"
        return f"{self.get_scope_display().lower()} {self.scope_value}"


class TargetKind(models.TextChoices):
    STREAM = "stream", "Stream"
    WEBHOOK_URL = "webhook_url", "Webhook URL"
    SOURCE = "source", "Source"


class IncidentQuerySet(models.QuerySet["Incident"]):
    def open(self) -> IncidentQuerySet:
        return self.filter(resolved_at__isnull=True)

    def unattended(self, now: datetime) -> IncidentQuerySet:
        """Open incidents nobody has acknowledged or snoozed: what a digest still nags about."""
        return self.open().filter(acknowledged_at__isnull=True).exclude(snoozed_until__gt=now)


def _incident_visible(visibility: Visibility, via: str = "") -> Q:
    """A stream's incidents with the stream; a webhook URL's with the URL; a source's (its polls) to everyone.
    `via`: the path to the incident from a model that belongs to one (its messages)."""
    return (
        Q(**{f"{via}stream_id__in": visibility.sorted_ids()})
        | Q(**{f"{via}target_kind": TargetKind.WEBHOOK_URL, f"{via}stream_id": "",
               f"{via}webhook_url__in": sorted(visibility.urls)})
        | Q(**{f"{via}target_kind": TargetKind.SOURCE})
    )


def _message_visible(visibility: Visibility) -> Q:
    """A mail or channel message with its incident; one of no incident (a digest, a test) to those who see
    every stream only."""
    return _incident_visible(visibility, via="incident__")


class Incident(models.Model):
    """A period during which a rule held for one target (a stream, a webhook URL or a source)."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="incidents")
    target_kind = models.CharField(max_length=16, choices=TargetKind.choices)
    target_key = models.CharField(max_length=2048)
    label = models.CharField(
        max_length=255, blank=True, help_text="Tag of the stream, or name of the source."
    )
    stream_id = models.CharField(max_length=64, blank=True)
    webhook_url = models.CharField(max_length=2048, blank=True)
    # One line saying what and where, e.g. "stream orders: 42 failed deliveries to hooks.example.com — …".
    summary = models.CharField(max_length=500)
    # What the condition saw when the incident opened: counts, error groups, first failures.
    details = models.JSONField(default=dict)
    opened_at = models.DateTimeField()
    last_holding_at = models.DateTimeField()
    # Set while the condition is clear; the incident resolves once this is older than the grace period.
    clear_since = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, help_text="Empty when the condition cleared.")
    # The opening mail's Message-ID; the resolution mail replies to it.
    message_id = models.CharField(max_length=255)
    # The workflow: who owns it, who said they are on it, and until when it is quiet. Each change is also an
    # IncidentEvent on the timeline.
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    snoozed_until = models.DateTimeField(
        null=True, blank=True, help_text="Left out of digests until then, like an acknowledged incident."
    )

    objects = ScopedManager.from_queryset(IncidentQuerySet)()
    visible_to = staticmethod(_incident_visible)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            # Two evaluators racing to open the same incident: the second insert fails.
            models.UniqueConstraint(
                fields=["rule", "target_key"], condition=Q(resolved_at__isnull=True), name="incident_one_open"
            ),
        ]
        indexes = [
            models.Index(fields=["rule", "target_key", "-resolved_at"], name="incident_rule_target"),
            # The open incidents on every page (alerts.context_processors), newest first, however many
            # resolved ones the table holds.
            models.Index(fields=["-opened_at"], condition=Q(resolved_at__isnull=True), name="incident_open_newest"),
        ]

    def __str__(self) -> str:
        return visible(self.summary)

    def get_absolute_url(self) -> str:
        return reverse("alerts:incident", args=[self.pk])

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None

    def deliveries(self) -> DeliveryQuerySet:
        """The deliveries this incident concerns: its stream's or its webhook URL's chain events (test webhooks
        are no chain event), none for a source's. Its impact, its messages and its page all count these."""
        chain_events = Delivery.objects.chain_events()
        if self.target_kind == TargetKind.STREAM:
            return chain_events.for_stream(self.stream_id or self.target_key)
        if self.target_kind == TargetKind.WEBHOOK_URL:
            return chain_events.filter(webhook_url=self.webhook_url or self.target_key)
        return chain_events.none()


class IncidentEventKind(models.TextChoices):
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    ASSIGNED = "assigned", "Assigned"
    NOTE = "note", "Note"
    SNOOZED = "snoozed", "Snoozed"
    UNSNOOZED = "unsnoozed", "Snooze ended"


class IncidentEvent(models.Model):
    """One thing a person did to an incident, for its timeline; append-only."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=IncidentEventKind.choices)
    # Kept as text: the timeline outlives the user account.
    actor = models.CharField(max_length=150)
    text = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["incident", "created_at"], name="incident_event_incident")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} by {visible(self.actor)}"


class NotificationKind(models.TextChoices):
    OPENED = "opened", "Incident opened"
    RESOLVED = "resolved", "Incident resolved"
    DIGEST = "digest", "Digest"
    TEST = "test", "Test mail"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    HELD = "held", "Held back by the hourly cap"
    DIGESTED = "digested", "Sent in a digest"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Not sent"


class OutboxMessage(models.Model):
    """What every outgoing message row has, whatever carries it (dashboard.alerts.outbox sends them all).

    A row is written in the transaction of what it reports, claimed by one sender with a conditional UPDATE
    (`pending` -> `sending`), and ends `sent`, `failed` or `skipped`; `attempts` and `next_attempt_at` carry
    its retries with backoff, `error` the last failure."""

    status = models.CharField(
        max_length=16, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    created_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        abstract = True

    def lease_name(self) -> str:
        """The Redis lease its sender holds from before the claim to after the row says `sent`."""
        raise NotImplementedError

    def accepted_key(self) -> str:
        """The Redis key written once the service accepted this message; unique to the message, so no other
        database's row with the same id (a restored backup, a test database) is ever taken for sent."""
        raise NotImplementedError


class Notification(OutboxMessage):
    """One mail: rendered when its transition happens, sent by whichever worker claims it first."""

    kind = models.CharField(max_length=16, choices=NotificationKind.choices)
    rule = models.ForeignKey(AlertRule, null=True, on_delete=models.CASCADE, related_name="notifications")
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    recipients = ArrayField(models.CharField(max_length=254), default=list)
    subject = models.CharField(max_length=500)
    body_text = models.TextField()
    body_html = models.TextField()
    message_id = models.CharField(max_length=255)
    in_reply_to = models.CharField(max_length=255, blank=True)
    # The digest that carried this held-back mail.
    digest = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried"
    )

    objects = ScopedManager()
    visible_to = staticmethod(_message_visible)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # An incident opens and resolves once, so it has at most one mail of each kind.
            models.UniqueConstraint(
                fields=["incident", "kind"],
                condition=Q(kind__in=["opened", "resolved"]),
                name="notification_one_per_transition",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="notification_status"),
            models.Index(fields=["sent_at"], condition=Q(status="sent"), name="notification_sent_at"),
        ]

    def __str__(self) -> str:
        return visible(self.subject)

    def lease_name(self) -> str:
        return f"mail:{self.pk}"

    def accepted_key(self) -> str:
        return f"mail-accepted:{self.message_id}"

    @property
    def status_class(self) -> str:
        """The page's status badge: green sent, red failed, amber anything still in flight or held."""
        if self.status in (NotificationStatus.SENT, NotificationStatus.DIGESTED):
            return "status-delivered"
        if self.status == NotificationStatus.FAILED:
            return "status-failed"
        return "status-retrying"


class ChannelKind(models.TextChoices):
    SLACK = "slack", "Slack"
    TEAMS = "msteams", "Microsoft Teams"
    DISCORD = "discord", "Discord"
    APPRISE = "apprise", "Other (any Apprise URL)"
    WEBHOOK = "webhook", "JSON webhook, signed (HMAC-SHA256)"
    PAGERDUTY = "pagerduty", "PagerDuty (Events API v2)"
    OPSGENIE = "opsgenie", "Opsgenie (Alert API)"


# Kinds sent through Apprise: the URL is an Apprise URL or the service's own webhook URL.
APPRISE_KINDS = (ChannelKind.SLACK, ChannelKind.TEAMS, ChannelKind.DISCORD, ChannelKind.APPRISE)
# Kinds whose incidents are opened and resolved at the service under our incident's key.
PAGER_KINDS = (ChannelKind.PAGERDUTY, ChannelKind.OPSGENIE)


class Channel(models.Model):
    """Somewhere besides email that alert rules notify. URL and secret are stored encrypted, never shown."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=ChannelKind.choices)
    enabled = models.BooleanField(default=True)
    # Fernet tokens (dashboard.encryption): the URL can carry the token itself (Slack, Teams, Discord).
    url_encrypted = models.TextField(blank=True, editable=False)
    secret_encrypted = models.TextField(blank=True, editable=False)
    # Scheme and host of the URL, for lists and messages: never a path, query or credential.
    url_hint = models.CharField(max_length=300, blank=True, editable=False)
    team = models.ForeignKey(
        "accounts.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="channels",
        help_text="The team whose channel this is: it gets every incident of the team's streams, and no "
        "incident of another team's streams even when a rule names it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The last attempt's outcome, whatever it was for (an incident or a test).
    last_attempt_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_attempt_ok = models.BooleanField(null=True, editable=False)
    last_attempt_result = models.CharField(max_length=500, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return visible(self.name)


# Channel secrets are encrypted by dashboard.alerts.channels; `rotate_secrets` re-encrypts them with the rest.
register_column(Channel._meta.db_table, "url_encrypted")
register_column(Channel._meta.db_table, "secret_encrypted")


class ChannelMessageKind(models.TextChoices):
    """What a channel message is about: the values of NotificationKind, named for a channel, not a mail."""

    OPENED = NotificationKind.OPENED.value, "Incident opened"
    RESOLVED = NotificationKind.RESOLVED.value, "Incident resolved"
    TEST = NotificationKind.TEST.value, "Test message"


class ChannelMessage(OutboxMessage):
    """One message to one channel: an incident's opening or resolution, or a test.

    Written in the transaction of the transition, sent only by the worker that claims it with a conditional
    UPDATE, like a Notification row. The payload is fixed when the row is written, so every retry sends the
    same message.
    """

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="messages")
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.CASCADE, related_name="channel_messages"
    )
    kind = models.CharField(max_length=16, choices=ChannelMessageKind.choices)
    payload = models.JSONField(default=dict)
    # Names this message in the "accepted by the service" marker (a mail has its Message-ID for that).
    token = models.UUIDField(db_default=RandomUUID(), editable=False)

    objects = ScopedManager()
    visible_to = staticmethod(_message_visible)

    class Meta:
        verbose_name_plural = "channel messages"
        ordering = ["-created_at", "-id"]
        constraints = [
            # One opening and one resolution per incident and channel, whoever writes them.
            models.UniqueConstraint(
                fields=["incident", "kind", "channel"],
                condition=Q(kind__in=["opened", "resolved"]),
                name="channel_delivery_one_per_transition",
            ),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="channel_delivery_status")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} to {self.channel}"

    def lease_name(self) -> str:
        return f"channel-message:{self.pk}"

    def accepted_key(self) -> str:
        return f"channel-accepted:{self.token}"

    @property
    def status_class(self) -> str:
        if self.status == NotificationStatus.SENT:
            return "status-delivered"
        if self.status == NotificationStatus.FAILED:
            return "status-failed"
        return "status-retrying"
