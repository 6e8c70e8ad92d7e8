"""Alert mails: rendered from templates when a transition happens, sent by the worker that claims the row.

Every mail is a Notification row. Rendering happens when the row is written, so a retry sends exactly the
same message (same Message-ID) and the alerts pages can show what went out. Sending claims the row with a
conditional UPDATE under a transaction-scoped advisory lock that also makes the hourly cap exact.
"""

from __future__ import annotations

import logging
import smtplib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.header import Header
from email.utils import make_msgid
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard.alerts.impact import Impact, incident_impact
from dashboard.alerts.models import (
    AlertRule,
    Condition,
    Incident,
    Notification,
    NotificationKind,
    NotificationStatus,
    TargetKind,
)
from dashboard.deliveries.links import deliveries_list_query, deliveries_list_url
from dashboard.deliveries.models import Delivery
from dashboard.locks import exclusive, is_held, redis_client
from dashboard.sources.models import Source
from dashboard.times import iso_minutes

log = logging.getLogger(__name__)

# Sends are attempted this many times (the first try and its retries) before the row is marked failed.
MAX_SEND_ATTEMPTS = 6
# A row claimed this long ago whose worker never reported back (killed mid-send) may be claimed again.
STALE_CLAIM = timedelta(minutes=10)
# How long the marker that the SMTP server accepted a mail is kept (longer than any retry or sweep).
ACCEPTED_MARKER_TTL = 14 * 86400
# How long a sender keeps trying to record "sent" on the row when the database is away (a restart).
RECORD_SENT_PATIENCE = 300.0
# Serialises claims so that the hourly cap is counted exactly across workers.
_CLAIM_LOCK = 0x616C657274  # "alert"
CAPPED_KINDS = (NotificationKind.OPENED, NotificationKind.RESOLVED)


class TransientSendError(Exception):
    """The SMTP server or the network failed in a way worth retrying."""


@dataclass(frozen=True)
class RenderedMail:
    subject: str
    text: str
    html: str


def render_mail(name: str, context: dict[str, Any]) -> RenderedMail:
    """One mail from its three templates: emails/<name>-subject.txt, -body-text.txt, -body-html.html."""
    context = {"site_url": settings.SITE_URL, **context}
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    return RenderedMail(
        subject=subject[:500],
        text=render_to_string(f"emails/{name}-body-text.txt", context),
        html=render_to_string(f"emails/{name}-body-html.html", context),
    )


def absolute(path: str) -> str:
    """A path of this site (from reverse() or get_absolute_url()) as the link a mail reader can follow."""
    return f"{settings.SITE_URL}{path}"


def alerts_link() -> str:
    return absolute(reverse("alerts:rules"))


def new_message_id() -> str:
    return make_msgid(domain=urlsplit(settings.SITE_URL).hostname or "localhost")


def status_word(incident: Incident) -> str:
    if incident.target_kind == TargetKind.SOURCE:
        return "STALE"
    if incident.rule.condition == Condition.ERROR_STATE_RISK:
        return "AT RISK"
    if incident.rule.condition == Condition.PROVIDER_ERROR_STATE:
        return "STREAM DOWN"
    if incident.rule.condition == Condition.CONFIRMATION_GAP:
        return "CONFIRMATION GAP"
    return "FAILING"


# The deliveries list's status filter that matches what the conditions count: retrying or failed, since
# most deliveries of an incident are still being retried.
FAILING = "failing"


def _target_filter(incident: Incident) -> dict[str, str]:
    """The deliveries list's filters (see dashboard.deliveries.links) selecting an incident's target."""
    if incident.target_kind == TargetKind.STREAM:
        return {"stream": incident.stream_id}
    if incident.target_kind == TargetKind.WEBHOOK_URL:
        return {"url": incident.webhook_url}
    return {}


def deliveries_queries(incident: Incident) -> dict[str, str]:
    """Query strings of the deliveries list for an incident's target (empty for a source's incident)."""
    target = _target_filter(incident)
    if not target:
        return {}
    return {"failed": deliveries_list_query(**target, status=FAILING), "all": deliveries_list_query(**target)}


def incident_links(incident: Incident) -> dict[str, Any]:
    """Absolute links to the filtered dashboard views an incident concerns."""
    links = {"incident": absolute(incident.get_absolute_url()), "alerts": alerts_link()}
    target = _target_filter(incident)
    if target:
        links["failed"] = absolute(deliveries_list_url(**target, status=FAILING))
        links["all"] = absolute(deliveries_list_url(**target))
    return links


def _group_link(target: dict[str, str], group_id: int) -> str:
    return absolute(deliveries_list_url(**target, status=FAILING, group=group_id))


def incident_context(incident: Incident, now: datetime | None = None) -> dict[str, Any]:
    details = dict(incident.details)
    target = _target_filter(incident)
    details["error_groups"] = [
        {**g, "url": _group_link(target, g["id"]) if g.get("id") else ""}
        for g in details.get("error_groups", [])
    ]
    for key in ("since", "last_success_at"):
        if isinstance(details.get(key), str):
            details[key] = parse_datetime(details[key]) or details[key]
    details["first_failures"] = [
        {**f, "date": parse_datetime(f["date"]) or f["date"]} for f in details.get("first_failures", [])
    ]
    return {
        "incident": incident,
        "rule": incident.rule,
        "details": details,
        "status_word": status_word(incident),
        "links": incident_links(incident),
        # The figures the incident page shows too, read when the message is written.
        "impact": incident_impact(incident, now or timezone.now()),
    }


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


def create_opened(incident: Incident, now: datetime) -> Notification:
    mail = render_mail("incident_opened", incident_context(incident, now))
    return _create(
        incident.rule, NotificationKind.OPENED, mail, now, incident=incident, message_id=incident.message_id
    )


def resolved_context(incident: Incident, now: datetime) -> dict[str, Any]:
    """What a resolution message says, by mail or to a channel."""
    context = incident_context(incident, now)
    context["duration"] = (incident.resolved_at or now) - incident.opened_at
    if incident.target_kind == TargetKind.SOURCE:
        # The facts below are those of the opening; say that polling works again now.
        context["polled_at"] = (
            Source.objects.filter(pk=incident.target_key).values_list("last_success_at", flat=True).first()
            if incident.target_key.isdigit()
            else None
        )
    else:
        # The condition looks at recent deliveries; older ones may still be on the provider's retry schedule.
        # Saying so keeps a resolution from reading as "nothing is failing any more".
        target = _target_filter(incident)
        context["still_retrying"] = (
            Delivery.objects.slice(stream_id=target.get("stream"), webhook_url=target.get("url"))
            .still_retrying()
            .count()
        )
    return context


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


def claim(notification_id: int, now: datetime, *, sender_gone: bool = False) -> Notification | None:
    """Take the row for sending, or hold it back when the hourly cap is reached; None if not ours to send.

    `sender_gone`: the caller holds the mail's sending lock, so a row still `sending` has no live sender
    (its worker died before the server's answer) and is taken at once, not after STALE_CLAIM."""
    claimable = Q(status=NotificationStatus.PENDING) | Q(
        status=NotificationStatus.SENDING, claimed_at__lt=now - STALE_CLAIM
    )
    if sender_gone:
        claimable |= Q(status=NotificationStatus.SENDING)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CLAIM_LOCK])
        notification = Notification.objects.filter(claimable, pk=notification_id).first()
        if notification is None:
            return None
        if notification.kind in CAPPED_KINDS and sent_in_last_hour(now) >= settings.ALERT_MAX_MAILS_PER_HOUR:
            Notification.objects.filter(claimable, pk=notification_id).update(
                status=NotificationStatus.HELD,
                error=f"held back: {settings.ALERT_MAX_MAILS_PER_HOUR} alert mails sent in the last hour",
            )
            return None
        # The compare-and-set: only the worker whose UPDATE matched sends.
        if not Notification.objects.filter(claimable, pk=notification_id).update(
            status=NotificationStatus.SENDING, claimed_at=now, attempts=F("attempts") + 1
        ):
            return None
    notification.refresh_from_db()
    return notification


class AlertEmail(EmailMultiAlternatives):
    def message(self, *args: Any, **kwargs: Any) -> Any:
        msg = super().message(*args, **kwargs)
        if not self.subject.isascii():
            # Django folds a long encoded subject with a break right after "Subject:", which parsers keep as
            # a leading space; telling the encoder the header's name keeps the first line filled.
            msg.replace_header("Subject", Header(str(self.subject), "utf-8", header_name="Subject"))
        return msg


def as_email(notification: Notification) -> EmailMultiAlternatives:
    headers = {"Message-ID": notification.message_id, "X-Stream-Dashboard-Kind": notification.kind}
    if notification.in_reply_to:
        headers["In-Reply-To"] = notification.in_reply_to
        headers["References"] = notification.in_reply_to
    if notification.kind != NotificationKind.TEST:
        headers["Auto-Submitted"] = "auto-generated"
    message = AlertEmail(
        subject=notification.subject,
        body=notification.body_text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=notification.recipients,
        headers=headers,
    )
    message.attach_alternative(notification.body_html, "text/html")
    return message


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return any(400 <= code < 500 for code, _msg in exc.recipients.values())
    if isinstance(exc, smtplib.SMTPResponseException):
        return 400 <= exc.smtp_code < 500
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return False
    # Connection refused, dropped, timed out, DNS: the server may be back in a minute.
    return isinstance(exc, smtplib.SMTPServerDisconnected | smtplib.SMTPConnectError | OSError)


def retry_delay(attempts: int) -> timedelta:
    return timedelta(seconds=min(3600, 30 * 2 ** max(0, attempts - 1)))


def sending_lock_name(notification_id: int) -> str:
    return f"mail:{notification_id}"


def _accepted_key(notification_id: int) -> str | None:
    """Keyed by the mail's Message-ID, unique to this mail, so no other database's row with the same id (a
    restored backup, a test database) is ever taken for sent."""
    message_id = Notification.objects.filter(pk=notification_id).values_list("message_id", flat=True).first()
    return f"mail-accepted:{message_id}" if message_id else None


def accepted_by_server(notification_id: int) -> bool:
    """The SMTP server accepted this mail (the marker written right after its 250), whatever the row says."""
    key = _accepted_key(notification_id)
    try:
        return key is not None and bool(redis_client().exists(key))
    except redis.RedisError:
        return False


def _mark_accepted(notification: Notification) -> None:
    try:
        redis_client().set(f"mail-accepted:{notification.message_id}", "1", ex=ACCEPTED_MARKER_TTL)
    except redis.RedisError as exc:
        log.warning("notification %s: could not mark it accepted in Redis: %s", notification.pk, exc)


def _record_sent(notification_id: int, now: datetime) -> None:
    """The server accepted the mail: record it on the row, riding out a database restart — the mail is never
    sent again, so the write must not be lost to one."""
    deadline = time.monotonic() + RECORD_SENT_PATIENCE
    while True:
        try:
            Notification.objects.filter(pk=notification_id).update(
                status=NotificationStatus.SENT, sent_at=now, error="", next_attempt_at=None
            )
            return
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() > deadline or connection.in_atomic_block:
                raise
            log.warning("notification %s: sent, recording it waits for the database: %s", notification_id, exc)
            connection.close()
            time.sleep(1.0)


def send_notification(notification_id: int, now: datetime | None = None) -> str:
    """Send one claimed mail and record the result on the row; TransientSendError asks for a retry.

    Exactly once: the sender holds the mail's lease lock from before its claim to after the row says `sent`,
    so a row `sending` without a live holder had a sender that died before the server's answer, and is sent
    again at once. A mail the server accepted is marked in Redis before its row is written, and the row write
    waits out a database restart; a row left `sending` with that marker is recorded as sent, not re-sent."""
    now = now or timezone.now()
    with exclusive(sending_lock_name(notification_id)) as held:
        if held is None:
            return NotificationStatus.SENDING
        if accepted_by_server(notification_id):
            _record_sent(notification_id, now)
            return NotificationStatus.SENT
        notification = claim(notification_id, now, sender_gone=True)
        if notification is None:
            return (
                Notification.objects.filter(pk=notification_id).values_list("status", flat=True).first()
                or "missing"
            )
        try:
            as_email(notification).send(fail_silently=False)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded on the row, none is lost silently
            error = f"{type(exc).__name__}: {exc}"[:2000]
            retry = is_transient(exc) and notification.attempts < MAX_SEND_ATTEMPTS
            Notification.objects.filter(pk=notification.pk, status=NotificationStatus.SENDING).update(
                status=NotificationStatus.PENDING if retry else NotificationStatus.FAILED,
                error=error,
                next_attempt_at=now + retry_delay(notification.attempts) if retry else None,
            )
            log.warning("notification %s: attempt %d failed: %s", notification.pk, notification.attempts, error)
            if retry:
                raise TransientSendError(error) from exc
            return NotificationStatus.FAILED
        _mark_accepted(notification)
        _record_sent(notification.pk, now)
    log.info(
        "notification %s sent to %d recipients: %s",
        notification.pk,
        len(notification.recipients),
        notification.subject,
    )
    return NotificationStatus.SENT


def sender_alive(notification_id: int) -> bool:
    try:
        return is_held(sending_lock_name(notification_id))
    except redis.RedisError:
        return True


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
    made_up = Impact(
        since=now - timedelta(minutes=15), until=incident.resolved_at, retrying=187, given_up=3, recovered=40,
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
        return render_mail(name, digest_context(rule, [incident], held, now))
    if name == "test":
        return render_mail(name, {"rule": rule, "links": {"alerts": alerts_link()}, "now": now})
    raise ValueError(f"no preview for {name!r}")
