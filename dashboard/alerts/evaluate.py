"""Turning what the conditions see into incident transitions, and transitions into notification rows.

Plain functions that take `now`, so tests control time. Every step is safe to run in several workers at
once: an incident opens through an insert guarded by a partial unique index, resolves through a conditional
UPDATE, and a digest is claimed by a compare-and-set on the rule's `digest_sent_at`.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.alerts import channels, conditions, mail
from dashboard.alerts.models import (
    DIGEST_PERIODS,
    HELD_DIGEST_PERIOD,
    AlertRule,
    Incident,
    Notification,
    NotificationKind,
    NotificationStatus,
    TargetKind,
)
from dashboard.deliveries.models import Stream
from dashboard.expectations.maintenance import Maintenance, Target
from dashboard.sources.models import Source

log = logging.getLogger(__name__)

def evaluate_all(now: datetime | None = None) -> list[int]:
    """Evaluate every enabled rule; returns the ids of notifications to send."""
    now = now or timezone.now()
    to_send: list[int] = []
    for rule in AlertRule.objects.filter(enabled=True):
        try:
            to_send += evaluate_rule(rule, now)
        except Exception:
            # One broken rule must not silence the others.
            log.exception("alert rule %s: evaluation failed", rule.pk)
    for incident in Incident.objects.open().filter(rule__enabled=False).select_related("rule"):
        # A disabled rule's incidents close quietly; nobody asked to hear about them any more.
        resolve_incident(incident, now, by="rule disabled", notify=False)
    return to_send


def evaluate_rule(rule: AlertRule, now: datetime) -> list[int]:
    holding = {o.target_key: o for o in conditions.observe(rule, now)}
    open_incidents = {i.target_key: i for i in rule.incidents.open()}
    maintenance = Maintenance.at(now)
    to_send: list[int] = []
    for key, observation in holding.items():
        incident = open_incidents.get(key)
        # Still holding: whatever flapping happened inside the grace period is forgotten. None updated: another
        # evaluator (the sweep beside a poll's) resolved it since it was read, so the failures seen now open a new
        # one at once instead of at the next sweep.
        if incident is not None and Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True).update(
            last_holding_at=now, clear_since=None
        ):
            continue
        if maintenance.covers(Target(observation.stream_id)):
            # Inside a maintenance window nothing new opens; an incident already open above stays open.
            continue
        notification = open_incident(rule, observation, now)
        if notification is not None and notification.status == NotificationStatus.PENDING:
            to_send.append(notification.pk)
    for key, incident in open_incidents.items():
        if key in holding:
            continue
        if polling_is_failing(incident, now):
            # No new deliveries are coming in: the target is unseen, not clear. It stays open (the poller-stale
            # rule speaks for the silence) and is judged again on fresh data.
            continue
        if incident.clear_since is None:
            Incident.objects.filter(pk=incident.pk, clear_since__isnull=True).update(clear_since=now)
        elif now - incident.clear_since >= rule.grace:
            notification = resolve_incident(incident, now, cleared=True)
            if notification is not None and notification.status == NotificationStatus.PENDING:
                to_send.append(notification.pk)
    return to_send


def polling_is_failing(incident: Incident, now: datetime) -> bool:
    """Whether a source the incident's deliveries come from is stale or failing (the sync banner's rule)."""
    if incident.target_kind == TargetKind.SOURCE:
        return False
    streams = Stream.objects.all()
    if incident.target_kind == TargetKind.STREAM:
        streams = streams.filter(stream_id=incident.target_key)
    else:
        streams = streams.filter(webhook_urls__contains=[incident.target_key])
    sources = Source.objects.filter(enabled=True, pk__in=streams.values("source"))
    return any(source.problem(now) is not None for source in sources)


def in_cooldown(rule: AlertRule, target_key: str, now: datetime) -> bool:
    if not rule.cooldown_minutes:
        return False
    return Incident.objects.filter(
        rule=rule, target_key=target_key, resolved_at__gt=now - rule.cooldown
    ).exists()


def open_incident(rule: AlertRule, observation: conditions.Observation, now: datetime) -> Notification | None:
    """Open an incident and write its opening mail; None when another worker opened it or cooldown holds."""
    if in_cooldown(rule, observation.target_key, now):
        return None
    details = conditions.describe(rule, observation, now)
    try:
        with transaction.atomic():
            incident = Incident.objects.create(
                rule=rule,
                target_kind=observation.target_kind,
                target_key=observation.target_key,
                label=observation.label[:255],
                stream_id=observation.stream_id,
                webhook_url=observation.webhook_url,
                summary=conditions.headline(rule, observation, details),
                details=details,
                opened_at=now,
                last_holding_at=now,
                message_id=mail.new_message_id(),
            )
            notification = mail.create_opened(incident, now)
            channels.create_for_transition(incident, NotificationKind.OPENED, now)
    except IntegrityError:
        # The partial unique index: another evaluator opened this incident a moment ago.
        return None
    log.info("alert rule %s: incident %s opened: %s", rule.pk, incident.pk, incident.summary)
    return notification


def resolve_incident(
    incident: Incident, now: datetime, *, by: str = "", notify: bool = True, cleared: bool = False
) -> Notification | None:
    """Resolve once: the conditional UPDATE lets exactly one caller write the resolution mail. `cleared`: only
    while the condition is still seen clear (an evaluator beside this one that saw it hold again since reset
    `clear_since`, and its incident stays open)."""
    unresolved = Incident.objects.filter(pk=incident.pk, resolved_at__isnull=True)
    if cleared:
        unresolved = unresolved.filter(clear_since__isnull=False)
    with transaction.atomic():
        if not unresolved.update(resolved_at=now, resolved_by=by[:150]):
            return None
        incident.resolved_at, incident.resolved_by = now, by[:150]
        log.info("incident %s resolved%s", incident.pk, f" by {by}" if by else "")
        # A rule switched off still closes what it opened at PagerDuty or Opsgenie, so nobody is paged for it.
        channels.create_for_transition(incident, NotificationKind.RESOLVED, now, pagers_only=not notify)
        return mail.create_resolved(incident, now) if notify else None


def digest_due_at(rule: AlertRule, first_held_at: datetime | None, now: datetime) -> datetime | None:
    """When the rule's next digest is due: its own schedule, or an hour after a mail was first held back."""
    candidates = []
    period = DIGEST_PERIODS.get(rule.digest)  # type: ignore[call-overload]
    if period is not None and not rule.is_muted(now):
        candidates.append((rule.digest_sent_at or rule.created_at) + period)
    if first_held_at is not None:
        candidates.append(first_held_at + HELD_DIGEST_PERIOD)
    return min(candidates) if candidates else None


def send_due_digests(now: datetime | None = None) -> list[int]:
    now = now or timezone.now()
    to_send: list[int] = []
    for rule in AlertRule.objects.all():
        held = list(
            rule.notifications.filter(status=NotificationStatus.HELD)
            .select_related("incident")
            .order_by("created_at")
        )
        due = digest_due_at(rule, held[0].created_at if held else None, now)
        if due is None or due > now:
            continue
        # Compare-and-set on the value read: of two sweeps, one writes the digest.
        if not AlertRule.objects.filter(pk=rule.pk, digest_sent_at=rule.digest_sent_at).update(
            digest_sent_at=now
        ):
            continue
        # Acknowledged and snoozed incidents have someone on them: the digest stops nagging about them.
        still_failing = (
            list(rule.incidents.unattended(now).select_related("rule").order_by("opened_at")) if rule.enabled else []
        )
        attended = rule.incidents.open().count() - len(still_failing) if rule.enabled else 0
        if not still_failing and not held:
            continue
        with transaction.atomic():
            digest = mail.create_digest(rule, still_failing, held, now, attended=attended)
            Notification.objects.filter(pk__in=[n.pk for n in held], status=NotificationStatus.HELD).update(
                status=NotificationStatus.DIGESTED, digest=digest
            )
        if digest.status == NotificationStatus.PENDING:
            to_send.append(digest.pk)
    return to_send


def sweep(now: datetime | None = None) -> list[int]:
    """The periodic pass: time-based conditions, grace periods and digests; returns the new mails' ids. The
    outbox's dispatch (`tasks.dispatch_due`) then sends these and every message that lost its task or sender."""
    now = now or timezone.now()
    return evaluate_all(now) + send_due_digests(now)
