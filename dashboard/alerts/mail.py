"""Alert mails: a Notification row per mail, rendered from templates when its transition happens.

Rendering happens when the row is written, so a retry sends exactly the same message (same Message-ID) and
the alerts pages can show what went out. The outbox (`dashboard.alerts.outbox`) sends the rows; this table's
part is the hourly cap, checked under a transaction-scoped advisory lock so that it is exact across workers.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from dashboard.alerts.impact import Impact
from dashboard.alerts.messages import (
    RenderedMail,
    alerts_link,
    incident_context,
    new_message_id,
    render_mail,
    resolved_context,
)
from dashboard.alerts.models import (
    AlertRule,
    Condition,
    Incident,
    Notification,
    NotificationKind,
    NotificationStatus,
    TargetKind,
)
from dashboard.alerts.outbox import Hold, Outbox, register
from dashboard.alerts.transports.smtp import EmailTransport
from dashboard.deliveries.teams import teams_of_stream
from dashboard.times import iso_minutes

log = logging.getLogger(__name__)

# Serialises claims so that the hourly cap is counted exactly across workers.
_CLAIM_LOCK = 0x616C657274  # "alert"
CAPPED_KINDS = (NotificationKind.OPENED, NotificationKind.RESOLVED)


def _create(
    rule: AlertRule | None,
    kind: str,
    mail: RenderedMail,
    now: datetime,
    *,
    incident: Incident | None = None,
    message_id: str = "",
    in_reply_to: str = "",
    recipients: list[str] | None = None,
) -> Notification:
    recipients = recipients if recipients is not None else (rule.recipient_list() if rule else [])
    status, error = NotificationStatus.PENDING, ""
    if not recipients:
        status, error = NotificationStatus.SKIPPED, "no recipients: set ALERT_EMAILS or the rule's recipients"
    elif rule is not None and kind in CAPPED_KINDS and rule.is_muted(now):
        status, error = NotificationStatus.SKIPPED, f"rule muted until {iso_minutes(rule.muted_until)}"
    return Notification.objects.create(
        kind=kind,
        rule=rule,
        incident=incident,
        status=status,
        error=error,
        recipients=recipients,
        subject=mail.subject,
        body_text=mail.text,
        body_html=mail.html,
        message_id=message_id or new_message_id(),
        in_reply_to=in_reply_to,
        created_at=now,
        next_attempt_at=now,
    )


def incident_recipients(incident: Incident) -> list[str]:
    """The rule's recipients, and the addresses of the teams that own the incident's stream."""
    found = incident.rule.recipient_list()
    if incident.stream_id:
        for team in teams_of_stream(incident.stream_id):
            found += [a for a in team.email_list() if a not in found]
    return found


def create_opened(incident: Incident, now: datetime) -> Notification:
    mail = render_mail("incident_opened", incident_context(incident, now))
    return _create(
        incident.rule, NotificationKind.OPENED, mail, now, incident=incident, message_id=incident.message_id,
        recipients=incident_recipients(incident),
    )


def create_resolved(incident: Incident, now: datetime) -> Notification:
    opened = incident.notifications.filter(kind=NotificationKind.OPENED).select_related("digest").first()
    mail = render_mail("incident_resolved", resolved_context(incident, now))
    # An opening that went out only inside a digest: the reader has the digest, so reply to that.
    replied = opened.digest if opened is not None and opened.digest is not None else None
    notification = _create(
        incident.rule,
        NotificationKind.RESOLVED,
        mail,
        now,
        incident=incident,
        in_reply_to=replied.message_id if replied is not None else incident.message_id,
        recipients=incident_recipients(incident),
    )
    reached_reader = {
        NotificationStatus.PENDING,
        NotificationStatus.SENDING,
        NotificationStatus.SENT,
        NotificationStatus.DIGESTED,
    }
    if notification.status == NotificationStatus.PENDING and (
        opened is None or opened.status not in reached_reader
    ):
        # Nobody was told it opened (muted, held back, failed); the digest shows it resolved instead.
        notification.status = NotificationStatus.SKIPPED
        notification.error = "the opening mail was not sent"
        notification.save(update_fields=["status", "error"])
    return notification


def create_test(rule: AlertRule, now: datetime, recipients: list[str] | None = None) -> Notification:
    mail = render_mail("test", {"rule": rule, "links": {"alerts": alerts_link()}, "now": now})
    return _create(rule, NotificationKind.TEST, mail, now, recipients=recipients)


def create_digest(
    rule: AlertRule, incidents: list[Incident], held: list[Notification], now: datetime, *, attended: int = 0
) -> Notification:
    context = digest_context(rule, incidents, held, now, attended=attended)
    return _create(rule, NotificationKind.DIGEST, render_mail("digest", context), now)


def digest_context(
    rule: AlertRule, incidents: list[Incident], held: list[Notification], now: datetime, *, attended: int = 0
) -> dict[str, Any]:
    """A held-back mail is the reader's only news of its incident, so it carries the incident's facts; an
    open incident already shown with its held mail is not listed a second time under "still failing"."""
    shown = {n.incident_id for n in held if n.incident_id is not None}
    return {
        "rule": rule,
        "open_count": len(incidents),
        # Open, but acknowledged or snoozed: counted, not listed.
        "attended": attended,
        "incidents": [incident_context(i, now) for i in incidents if i.pk not in shown],
        "held": [
            {"notification": n, "item": incident_context(n.incident, now) if n.incident is not None else None}
            for n in held
        ],
        "now": now,
        "links": {"alerts": alerts_link()},
    }


def sent_in_last_hour(now: datetime) -> int:
    hour_ago = now - timedelta(hours=1)
    return (
        Notification.objects.filter(kind__in=CAPPED_KINDS)
        .filter(
            Q(status=NotificationStatus.SENT, sent_at__gt=hour_ago)
            | Q(status=NotificationStatus.SENDING, claimed_at__gt=hour_ago)
        )
        .count()
    )


class MailOutbox(Outbox[Notification]):
    """Alert mails. Claims are serialised so that the hourly cap of opening and resolution mails is exact
    across workers; a mail over the cap is held back for the next digest instead of being sent."""

    name = "mail"
    model = Notification
    claim_lock = _CLAIM_LOCK

    def gate(self, row: Notification, now: datetime) -> Hold | None:
        if row.kind in CAPPED_KINDS and sent_in_last_hour(now) >= settings.ALERT_MAX_MAILS_PER_HOUR:
            return Hold(
                NotificationStatus.HELD,
                f"held back: {settings.ALERT_MAX_MAILS_PER_HOUR} alert mails sent in the last hour",
                row.next_attempt_at,
            )
        return None

    def transport(self, row: Notification) -> EmailTransport:
        return EmailTransport()

    def describe(self, row: Notification) -> str:
        return f"{row.subject} (to {len(row.recipients)} recipients)"


MAIL = register(MailOutbox())


PREVIEWS = ("incident_opened", "incident_resolved", "digest", "test")


def preview(name: str, now: datetime | None = None) -> RenderedMail:
    """Each mail rendered from a made-up incident, for checking the templates without waiting for a failure."""
    now = now or timezone.now()
    rule = AlertRule(
        name="Failed deliveries", condition=Condition.ANY_FAILURE, window_minutes=15, grace_minutes=10
    )
    stream_id = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"
    webhook_url = "https://hooks.example.com/moralis"
    error_message = "connect ECONNREFUSED 203.0.113.7:443"
    failure = {
        "id": "3b0c2f7e-8a51-4d1e-b3a7-0d6c1e9f2a44",
        "date": (now - timedelta(minutes=14)).isoformat(),
        "stream_id": stream_id,
        "tag": "orders",
        "webhook_url": webhook_url,
        "status": "retrying",
        "retries": 2,
        "block_number": 19_000_123,
        "error_message": error_message,
    }
    incident = Incident(
        pk=0,
        rule=rule,
        target_kind=TargetKind.STREAM,
        target_key=stream_id,
        label="orders",
        stream_id=stream_id,
        webhook_url=webhook_url,
        summary="stream orders: 42 failed deliveries to hooks.example.com — connect ECONNREFUSED",
        details={
            "failures": 42,
            "since": (now - timedelta(minutes=15)).isoformat(),
            "host": "hooks.example.com",
            "error_summary": "connect ECONNREFUSED",
            "error_groups": [
                {
                    "id": 1,
                    "template": "connect ECONNREFUSED <ip>",
                    "example": error_message,
                    "count": 40,
                },
                {
                    "id": 2,
                    "template": "timeout of <duration> exceeded",
                    "example": "timeout of 10000ms exceeded",
                    "count": 2,
                },
            ],
            "first_failures": [failure],
        },
        opened_at=now - timedelta(minutes=25),
        last_holding_at=now,
        resolved_at=now if name == "incident_resolved" else None,
        message_id="<preview@localhost>",
    )
    # The figures agree with one another: the 42 failures of the condition are those of the error groups (40 + 2)
    # and of the impact (32 still failing, 10 delivered on a retry), over the same 15 minutes.
    made_up = Impact(
        since=now - timedelta(minutes=15), until=incident.resolved_at, retrying=30, given_up=2, recovered=10,
        first_failure=now - timedelta(minutes=14), last_failure=now - timedelta(minutes=1), at=now,
    )
    if name == "incident_opened":
        return render_mail(name, {**incident_context(incident, now), "impact": made_up})
    if name == "incident_resolved":
        return render_mail(
            name, {**incident_context(incident, now), "impact": made_up, "duration": now - incident.opened_at}
        )
    if name == "digest":
        held = [
            Notification(
                subject=f"[FAILING] {incident.summary}", created_at=now - timedelta(minutes=40), incident=incident
            )
        ]
        context = digest_context(rule, [incident], held, now)
        for entry in context["held"]:
            # The made-up incident is in no table: its impact is the made-up one, not read (as zeros) from them.
            entry["item"]["impact"] = made_up
        return render_mail(name, context)
    if name == "test":
        return render_mail(name, {"rule": rule, "links": {"alerts": alerts_link()}, "now": now})
    raise ValueError(f"no preview for {name!r}")
