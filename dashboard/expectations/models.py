"""What a stream owes and when it owes nothing: maintenance windows (one-off, or recurring by a cron expression in
a time zone) for a stream, a tag or everything."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronsim import CronSim, CronSimError
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from dashboard.deliveries.scopes import scope_filter
from dashboard.text import visible
from dashboard.times import zone
from dashboard.visibility import ScopedManager, Visibility


class WindowScope(models.TextChoices):
    ALL = "all", "Everything"
    STREAM = "stream", "One stream"
    TAG = "tag", "One tag"


class MaintenanceWindowQuerySet(models.QuerySet["MaintenanceWindow"]):
    def may_cover(self, start: datetime, end: datetime) -> MaintenanceWindowQuerySet:
        """The windows that can have an occurrence overlapping [start, end): one-off windows overlapping it,
        every recurring window (their occurrences are found in Python, `maintenance.occurrences`)."""
        return self.filter(Q(cron="", starts_at__lt=end, ends_at__gt=start) | ~Q(cron=""))


def _window_visible(visibility: Visibility) -> Q:
    return (
        Q(scope=WindowScope.ALL)
        | Q(scope=WindowScope.STREAM, scope_value__in=visibility.sorted_ids())
        | Q(scope=WindowScope.TAG, scope_value__in=sorted(visibility.tags))
    )


class MaintenanceWindow(models.Model):
    """A time during which a scope owes nothing: rules open no incident for its targets (incidents already open stay
    open), and quiet-stream baselines and error budgets leave its hours out. One-off (`starts_at`, `ends_at`) or
    recurring (`cron` in `time_zone`, each occurrence lasting `duration_minutes`)."""

    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=WindowScope.choices, default=WindowScope.STREAM)
    scope_value = models.CharField(max_length=255, blank=True, help_text="The stream id or tag the scope names.")
    starts_at = models.DateTimeField(null=True, blank=True, help_text="One-off: when it starts.")
    ends_at = models.DateTimeField(null=True, blank=True, help_text="One-off: when it ends.")
    cron = models.CharField(
        max_length=100,
        blank=True,
        help_text="Recurring: when each occurrence starts, as cron's five fields (minute hour day month weekday) "
        "in the time zone below, e.g. “0 3 * * 0” for Sundays at 03:00.",
    )
    duration_minutes = models.PositiveIntegerField(null=True, blank=True, help_text="Recurring: how long each lasts.")
    time_zone = models.CharField(
        max_length=64, default="UTC", help_text="Recurring: the IANA zone the cron expression is read in."
    )
    reason = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager.from_queryset(MaintenanceWindowQuerySet)()
    visible_to = staticmethod(_window_visible)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(cron="", starts_at__isnull=False, ends_at__isnull=False)
                | (~Q(cron="") & Q(duration_minutes__gt=0)),
                name="maintenance_one_off_or_recurring",
            ),
        ]

    def __str__(self) -> str:
        return visible(self.name)

    @property
    def recurring(self) -> bool:
        return bool(self.cron)

    @property
    def duration(self) -> timedelta:
        return timedelta(minutes=self.duration_minutes or 0)

    def scope_filter(self) -> tuple[str, str] | None:
        return scope_filter(self.scope, self.scope_value)

    def describe_scope(self) -> str:
        if self.scope == WindowScope.ALL:
            return "everything"
        return f"{self.get_scope_display().lower()} {self.scope_value}"

    def describe_schedule(self) -> str:
        if not self.recurring:
            return "once"
        try:
            said = CronSim(self.cron, datetime.now(zone(self.time_zone))).explain()
        except (CronSimError, ValueError):
            said = self.cron
        return f"{said} ({self.time_zone}), for {self.duration_minutes} min"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        self.cron = " ".join(self.cron.split())
        if self.scope != WindowScope.ALL and not self.scope_value.strip():
            errors["scope_value"] = "Name the stream id or tag."
        if self.recurring:
            if self.starts_at or self.ends_at:
                errors["starts_at"] = "A recurring window has a cron expression and a duration, no start or end."
            if not self.duration_minutes:
                errors["duration_minutes"] = "How long each occurrence lasts, in minutes."
            try:
                tz = zone(self.time_zone)
            except ValueError as exc:
                errors["time_zone"] = str(exc)
            else:
                try:
                    CronSim(self.cron, datetime.now(tz))
                except CronSimError as exc:
                    errors["cron"] = f"Not a cron expression (minute hour day month weekday): {exc}."
        elif self.starts_at is None or self.ends_at is None:
            errors["starts_at"] = "A one-off window has a start and an end; a recurring one a cron expression."
        elif self.ends_at <= self.starts_at:
            errors["ends_at"] = "The end comes after the start."
        if errors:
            raise ValidationError(errors)


class DeliveryObjective(models.TextChoices):
    EVENTUALLY = "eventually", "Delivered (eventually)"
    FIRST_ATTEMPT = "first_attempt", "Delivered on the first attempt"


class StreamObjective(models.Model):
    """A stream's own service level objectives, where they differ from the settings' (`SLO_*`): an empty field
    takes the setting's value."""

    stream_id = models.CharField(max_length=64, unique=True, help_text="The stream the objectives are for.")
    delivery = models.CharField(
        max_length=16, choices=DeliveryObjective.choices, blank=True,
        help_text="What counts as a good delivery; empty: the SLO_DELIVERY setting.",
    )
    delivery_target = models.DecimalField(
        max_digits=6, decimal_places=3, null=True, blank=True,
        help_text="Percent of deliveries that must be good, e.g. 99.9; empty: SLO_DELIVERY_TARGET.",
    )
    latency_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The processing latency an unconfirmed delivery must stay within; empty: SLO_LATENCY_SECONDS. "
        "Best one of the latency histogram's bounds (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600 s): between "
        "two, the share within is interpolated.",
    )
    latency_target = models.DecimalField(
        max_digits=6, decimal_places=3, null=True, blank=True,
        help_text="Percent of unconfirmed deliveries that must be that fast; empty: SLO_LATENCY_TARGET.",
    )
    note = models.TextField(blank=True)
    updated_by = models.CharField(max_length=150, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScopedManager()

    class Meta:
        ordering = ["stream_id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(delivery_target__isnull=True) | Q(delivery_target__gt=0, delivery_target__lt=100))
                & (Q(latency_target__isnull=True) | Q(latency_target__gt=0, latency_target__lt=100))
                & (Q(latency_seconds__isnull=True) | Q(latency_seconds__gte=1, latency_seconds__lte=3600)),
                name="stream_objective_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"objectives of {visible(self.stream_id)}"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        self.stream_id = self.stream_id.strip()
        for name in ("delivery_target", "latency_target"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 100:
                errors[name] = "A percentage above 0 and below 100, such as 99.9."
        if self.latency_seconds is not None and not 1 <= self.latency_seconds <= 3600:
            errors["latency_seconds"] = "Between 1 and 3600 seconds."
        if errors:
            raise ValidationError(errors)
