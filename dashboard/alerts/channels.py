"""Alert channels besides email: Slack, Teams, Discord and the rest through Apprise, a signed JSON webhook,
PagerDuty and Opsgenie.

Each incident transition writes one ChannelDelivery row per channel, in the transaction that writes the
mail's Notification row; a worker sends it only after claiming it with a conditional UPDATE, records the
answer on the row, and retries a failed send with backoff a bounded number of times. A row the service
accepted is never claimed again.

Apprise speaks some hundred services from one URL each, but it cannot sign a request body, nor resolve what
it opened at PagerDuty (its plugin always sends `trigger`, without a dedup key) or Opsgenie (its close looks
up request ids in a store local to the process that created the alert). Those three are small, documented
HTTP calls made with httpx here: the webhook's body carries an HMAC-SHA256 signature, and the pager
services are given our incident's key, so they open and resolve the same incident as we do.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import apprise
import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.template.loader import render_to_string
from django.utils import timezone

from dashboard import encryption
from dashboard.alerts import mail
from dashboard.alerts.impact import Impact
from dashboard.alerts.models import (
    APPRISE_KINDS,
    PAGER_KINDS,
    Channel,
    ChannelDelivery,
    ChannelKind,
    Incident,
    NotificationKind,
    NotificationStatus,
)
from dashboard.text import visible
from dashboard.times import iso_minutes

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Stream-Dashboard-Signature"
TIMESTAMP_HEADER = "X-Stream-Dashboard-Timestamp"
EVENT_HEADER = "X-Stream-Dashboard-Event"
DELIVERY_HEADER = "X-Stream-Dashboard-Delivery"
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
OPSGENIE_ALERTS_URL = "https://api.opsgenie.com/v2/alerts"
HTTP_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
# A resolution waits this long for its opening to the same channel (still being retried) before trying again.
WAIT_FOR_OPENING = timedelta(seconds=30)
# A pending row whose task should have run this long ago lost it (broker restart); the sweep queues it again.
LOST_TASK_AFTER = timedelta(minutes=2)
EVENTS = {
    NotificationKind.OPENED: "incident.opened",
    NotificationKind.RESOLVED: "incident.resolved",
    NotificationKind.TEST: "test",
}
# Messages that reached (or may yet reach) the channel; a resolution follows only such an opening.
_REACHING = (NotificationStatus.PENDING, NotificationStatus.SENDING, NotificationStatus.SENT)


class SendFailed(Exception):
    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


# --- Configuring a channel -----------------------------------------------------------------------------


def apprise_service(url: str) -> str | None:
    """The service Apprise reads from a URL (its own scheme or the service's webhook URL), None if none."""
    with _captured_apprise_log():
        plugin = apprise.Apprise.instantiate(url)
    return None if plugin is None else str(plugin.service_name)


def url_hint(kind: str, url: str) -> str:
    """What may be shown of a URL: the scheme and host of a web URL, the service and scheme otherwise.

    Apprise URLs such as slack://TokenA/TokenB/TokenC carry the secret where a host would be."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and kind not in APPRISE_KINDS:
        return f"{parts.scheme}://{parts.hostname or ''}"
    service = apprise_service(url) if kind in APPRISE_KINDS else None
    return f"{service} ({parts.scheme}://…)" if service else f"{parts.scheme}://…"


def check_settings(kind: str, url: str, secret: str) -> dict[str, str]:
    """Errors by form field for a channel's kind, URL and secret; empty when they can be used."""
    errors: dict[str, str] = {}
    if kind in APPRISE_KINDS:
        if not url:
            errors["new_url"] = "Enter the service's webhook URL or an Apprise URL."
        elif apprise_service(url) is None:
            errors["new_url"] = "Apprise does not recognise this URL; see the Apprise URL list for the service."
    elif kind == ChannelKind.WEBHOOK:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            errors["new_url"] = "Enter the http:// or https:// URL the webhook is posted to."
        if len(secret) < 16:
            errors["new_secret"] = "Enter a signing secret of at least 16 characters."
    elif kind in PAGER_KINDS:
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            errors["new_url"] = "Leave empty for the service's own API, or enter its http(s) endpoint."
        if not secret:
            errors["new_secret"] = (
                "Enter the integration's routing key." if kind == ChannelKind.PAGERDUTY else "Enter the API key."
            )
    return errors


def store_settings(channel: Channel, *, url: str | None, secret: str | None) -> None:
    """Encrypt a new URL or secret onto the (unsaved) channel; None keeps what is stored."""
    if url is not None:
        channel.url_encrypted = encryption.encrypt(url)
        channel.url_hint = url_hint(channel.kind, url)[:300]
    if secret is not None:
        channel.secret_encrypted = encryption.encrypt(secret)


def channel_url(channel: Channel) -> str:
    url = encryption.decrypt(channel.url_encrypted)
    if not url and channel.kind == ChannelKind.PAGERDUTY:
        return PAGERDUTY_EVENTS_URL
    if not url and channel.kind == ChannelKind.OPSGENIE:
        return OPSGENIE_ALERTS_URL
    return url


# --- Writing deliveries at transition time -------------------------------------------------------------


def dedup_key(incident: Incident) -> str:
    """Our incident's key at PagerDuty and Opsgenie, and in the webhook's body."""
    return f"stream-dashboard-incident-{incident.pk}"


def incident_payload(incident: Incident, kind: str, now: datetime) -> dict[str, Any]:
    """The message of a transition, fixed when it happens: title, text, and the facts as data."""
    if kind == NotificationKind.RESOLVED:
        context = mail.resolved_context(incident, now)
        title = render_to_string("emails/incident_resolved-subject.txt", context)
    else:
        context = mail.incident_context(incident, now)
        title = render_to_string("emails/incident_opened-subject.txt", context)
    links = context["links"]
    return {
        "event": EVENTS[kind],  # type: ignore[index]
        "title": " ".join(title.split())[:500],
        "text": render_to_string(f"alerts/channels/{kind}.txt", {"site_url": settings.SITE_URL, **context}),
        "dedup_key": dedup_key(incident),
        "incident": {
            "id": incident.pk,
            "url": links["incident"],
            "status": "resolved" if kind == NotificationKind.RESOLVED else "open",
            "status_word": context["status_word"],
            "rule": incident.rule.name,
            "condition": incident.rule.condition,
            "target_kind": incident.target_kind,
            "target": incident.target_key,
            "label": incident.label,
            "stream_id": incident.stream_id,
            "webhook_url": incident.webhook_url,
            "summary": incident.summary,
            "opened_at": incident.opened_at.isoformat(),
            "resolved_at": incident.resolved_at.isoformat() if incident.resolved_at else None,
            "resolved_by": incident.resolved_by,
            "still_retrying": context.get("still_retrying"),
            "impact": _impact_data(context.get("impact")),
        },
        "links": links,
    }


def _impact_data(impact: Impact | None) -> dict[str, Any] | None:
    if impact is None:
        return None
    return {
        "failing_now": impact.failing_now,
        "failed": impact.failed,
        "retrying": impact.retrying,
        "given_up": impact.given_up,
        "recovered": impact.recovered,
        "first_failure": impact.first_failure.isoformat() if impact.first_failure else None,
        "last_failure": impact.last_failure.isoformat() if impact.last_failure else None,
        "since": impact.since.isoformat(),
        "at": impact.at.isoformat(),
    }


def create_for_transition(
    incident: Incident, kind: str, now: datetime, *, pagers_only: bool = False
) -> list[ChannelDelivery]:
    """The rows of one opening or resolution, one per channel; called inside the transition's transaction.

    An opening goes to the rule's enabled channels. A resolution goes to the channels its opening reached
    (or may still reach), whatever the rule says now, so every channel that heard of an incident hears it
    resolved and no other does. `pagers_only` (a rule switched off) still closes pager incidents."""
    rule = incident.rule
    if kind == NotificationKind.OPENED:
        channels = list(rule.channels.filter(enabled=True))
    else:
        opened = ChannelDelivery.objects.filter(
            incident=incident, kind=NotificationKind.OPENED, status__in=_REACHING
        )
        channels = list(Channel.objects.filter(pk__in=opened.values("channel")))
    if pagers_only:
        channels = [c for c in channels if c.kind in PAGER_KINDS]
    if not channels:
        return []
    payload = incident_payload(incident, kind, now)
    status, error = NotificationStatus.PENDING, ""
    if kind == NotificationKind.OPENED and rule.is_muted(now):
        status, error = NotificationStatus.SKIPPED, f"rule muted until {iso_minutes(rule.muted_until)}"
    created = []
    for channel in channels:
        try:
            with transaction.atomic():
                created.append(
                    ChannelDelivery.objects.create(
                        channel=channel,
                        incident=incident,
                        kind=kind,
                        status=status,
                        error=error,
                        payload=payload,
                        created_at=now,
                        next_attempt_at=now,
                    )
                )
        except IntegrityError:
            # Written already (the unique constraint): a transition has one message per channel.
            continue
    return created


def create_test(channel: Channel, now: datetime) -> ChannelDelivery:
    links = {"alerts": mail.alerts_link()}
    text = render_to_string("alerts/channels/test.txt", {"channel": channel, "now": now, "links": links})
    payload = {
        "event": EVENTS[NotificationKind.TEST],
        "title": f"[TEST] Alert channel “{visible(channel.name)}”",
        "text": text,
        "dedup_key": f"stream-dashboard-test-{channel.pk}-{int(now.timestamp())}",
        "incident": None,
        "links": links,
    }
    return ChannelDelivery.objects.create(
        channel=channel,
        kind=NotificationKind.TEST,
        payload=payload,
        created_at=now,
        next_attempt_at=now,
    )


# --- Sending -------------------------------------------------------------------------------------------


def to_dispatch(now: datetime | None = None) -> list[int]:
    """Rows that need a send task: never tried and due, or whose task or worker was lost."""
    now = now or timezone.now()
    due = ChannelDelivery.objects.filter(
        Q(status=NotificationStatus.PENDING, attempts=0, next_attempt_at__lte=now)
        | Q(status=NotificationStatus.PENDING, next_attempt_at__lt=now - LOST_TASK_AFTER)
        | Q(status=NotificationStatus.SENDING, claimed_at__lt=now - mail.STALE_CLAIM)
    )
    return list(due.order_by("created_at", "pk").values_list("pk", flat=True))


def _opening_state(delivery: ChannelDelivery) -> str | None:
    if delivery.incident_id is None:
        return None
    return (
        ChannelDelivery.objects.filter(
            incident_id=delivery.incident_id, channel_id=delivery.channel_id, kind=NotificationKind.OPENED
        )
        .values_list("status", flat=True)
        .first()
    )


def claim(delivery_id: int, now: datetime) -> ChannelDelivery | None:
    """Take the row for sending; None if another worker has it, it is done, or it must wait."""
    # A row waiting out its backoff is not sent early by a duplicate task.
    claimable = Q(status=NotificationStatus.PENDING, next_attempt_at__lte=now) | Q(
        status=NotificationStatus.SENDING, claimed_at__lt=now - mail.STALE_CLAIM
    )
    delivery = ChannelDelivery.objects.filter(claimable, pk=delivery_id).select_related("channel").first()
    if delivery is None:
        return None
    if delivery.kind == NotificationKind.RESOLVED:
        opening = _opening_state(delivery)
        if opening in (NotificationStatus.PENDING, NotificationStatus.SENDING):
            # A resolution overtaking its opening would leave a pager incident open: wait for the opening.
            ChannelDelivery.objects.filter(claimable, pk=delivery_id).update(next_attempt_at=now + WAIT_FOR_OPENING)
            return None
        if opening != NotificationStatus.SENT:
            ChannelDelivery.objects.filter(claimable, pk=delivery_id).update(
                status=NotificationStatus.SKIPPED, error="the opening never reached this channel", next_attempt_at=None
            )
            return None
    if not delivery.channel.enabled:
        ChannelDelivery.objects.filter(claimable, pk=delivery_id).update(
            status=NotificationStatus.SKIPPED, error="channel disabled", next_attempt_at=None
        )
        return None
    # The compare-and-set: only the worker whose UPDATE matched sends.
    if not ChannelDelivery.objects.filter(claimable, pk=delivery_id).update(
        status=NotificationStatus.SENDING, claimed_at=now, attempts=F("attempts") + 1
    ):
        return None
    delivery.refresh_from_db()
    return delivery


def send_delivery(delivery_id: int, now: datetime | None = None) -> str:
    """Send one claimed row and record the answer; mail.TransientSendError asks the caller for a retry."""
    now = now or timezone.now()
    delivery = claim(delivery_id, now)
    if delivery is None:
        return ChannelDelivery.objects.filter(pk=delivery_id).values_list("status", flat=True).first() or "missing"
    channel = delivery.channel
    secrets: list[str] = []
    try:
        url, secret = channel_url(channel), encryption.decrypt(channel.secret_encrypted)
        secrets = [url, secret]
        transmit(channel, url, secret, delivery)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded on the row, none is lost silently
        transient = exc.transient if isinstance(exc, SendFailed) else False
        error = scrub(str(exc) if isinstance(exc, SendFailed) else f"{type(exc).__name__}: {exc}", secrets)[:2000]
        retry = transient and delivery.attempts < mail.MAX_SEND_ATTEMPTS
        ChannelDelivery.objects.filter(pk=delivery.pk, status=NotificationStatus.SENDING).update(
            status=NotificationStatus.PENDING if retry else NotificationStatus.FAILED,
            error=error,
            next_attempt_at=now + mail.retry_delay(delivery.attempts) if retry else None,
        )
        _record_on_channel(channel, now, ok=False, result=error)
        log.warning("channel delivery %s (%s): attempt %d failed: %s", delivery.pk, channel.name, delivery.attempts, error)
        if retry:
            raise mail.TransientSendError(error) from exc
        return NotificationStatus.FAILED
    ChannelDelivery.objects.filter(pk=delivery.pk).update(
        status=NotificationStatus.SENT, sent_at=now, error="", next_attempt_at=None
    )
    _record_on_channel(channel, now, ok=True, result=f"accepted: {delivery.payload.get('title', '')}")
    log.info("channel delivery %s (%s) sent: %s", delivery.pk, channel.name, delivery.payload.get("title", ""))
    return NotificationStatus.SENT


def waiting_resolution(delivery_id: int, now: datetime | None = None) -> int | None:
    """After an opening went out: the resolution to the same channel that waited for it, made due now."""
    opening = ChannelDelivery.objects.filter(pk=delivery_id, kind=NotificationKind.OPENED).first()
    if opening is None or opening.incident_id is None:
        return None
    waiting = ChannelDelivery.objects.filter(
        incident_id=opening.incident_id,
        channel_id=opening.channel_id,
        kind=NotificationKind.RESOLVED,
        status=NotificationStatus.PENDING,
        attempts=0,
    )
    resolution_id = waiting.values_list("pk", flat=True).first()
    if resolution_id is not None:
        waiting.update(next_attempt_at=now or timezone.now())
    return resolution_id


def _record_on_channel(channel: Channel, now: datetime, *, ok: bool, result: str) -> None:
    Channel.objects.filter(pk=channel.pk).update(
        last_attempt_at=now, last_attempt_ok=ok, last_attempt_result=result[:500]
    )


def scrub(text: str, secrets: list[str]) -> str:
    """Remove a channel's URL, secret and the URL's token-like parts from a text we store or log."""
    parts: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        parts.add(secret)
        split = urlsplit(secret)
        pieces = [split.path, split.query, split.username or "", split.password or ""]
        if split.scheme not in ("http", "https"):
            pieces.append(split.netloc)
        for piece in pieces:
            parts.update(p for p in piece.replace("?", "/").replace("&", "/").replace("=", "/").split("/") if len(p) >= 6)
    for part in sorted(parts, key=len, reverse=True):
        text = text.replace(part, "[secret]").replace(quote(part, safe=""), "[secret]")
    return text


def transmit(channel: Channel, url: str, secret: str, delivery: ChannelDelivery) -> None:
    """Send the row's message over the channel's transport; SendFailed says what went wrong."""
    if channel.kind in APPRISE_KINDS:
        _send_apprise(url, delivery)
    elif channel.kind == ChannelKind.WEBHOOK:
        _send_webhook(url, secret, delivery)
    elif channel.kind == ChannelKind.PAGERDUTY:
        _send_pagerduty(url, secret, delivery)
    elif channel.kind == ChannelKind.OPSGENIE:
        _send_opsgenie(url, secret, delivery)
    else:
        raise SendFailed(f"unknown channel kind {channel.kind!r}", transient=False)


class _ThreadLog(logging.Handler):
    """Apprise reports a failure only as False and a log line; keep the lines of this thread's send."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage())


@contextmanager
def _captured_apprise_log() -> Iterator[_ThreadLog]:
    handler = _ThreadLog()
    logger = logging.getLogger("apprise")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


_APPRISE_TYPES = {
    NotificationKind.OPENED: apprise.NotifyType.FAILURE,
    NotificationKind.RESOLVED: apprise.NotifyType.SUCCESS,
}


def _send_apprise(url: str, delivery: ChannelDelivery) -> None:
    with _captured_apprise_log() as captured:
        notifier = apprise.Apprise()
        if not notifier.add(url):
            raise SendFailed("Apprise does not recognise the channel's URL", transient=False)
        ok = notifier.notify(
            title=delivery.payload["title"],
            body=delivery.payload["text"],
            notify_type=_APPRISE_TYPES.get(delivery.kind, apprise.NotifyType.INFO),  # type: ignore[call-overload]
            body_format=apprise.NotifyFormat.TEXT,
        )
    if not ok:
        # Apprise does not say whether a failure is worth retrying: every one is, a bounded number of times.
        raise SendFailed(" ".join(captured.lines) or "the service did not accept the message", transient=True)


def _post(url: str, *, content: bytes, headers: dict[str, str]) -> httpx.Response:
    try:
        response = httpx.post(url, content=content, headers=headers, timeout=HTTP_TIMEOUT, follow_redirects=False)
    except httpx.TimeoutException as exc:
        raise SendFailed(f"timed out: {type(exc).__name__}", transient=True) from exc
    except httpx.HTTPError as exc:
        raise SendFailed(f"unreachable: {type(exc).__name__}: {exc}", transient=True) from exc
    if response.is_success:
        return response
    transient = response.status_code in (408, 425, 429) or response.status_code >= 500
    raise SendFailed(f"HTTP {response.status_code}: {response.text[:300]}", transient=transient)


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: HMAC-SHA256 of "<timestamp>.<body>" with the channel's secret."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _send_webhook(url: str, secret: str, delivery: ChannelDelivery) -> None:
    body = json.dumps(delivery.payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "stream-dashboard-alerts",
        EVENT_HEADER: delivery.payload["event"],
        # The same on every attempt of one message: a receiver can drop a repeat it already has.
        DELIVERY_HEADER: str(delivery.pk),
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: webhook_signature(secret, timestamp, body),
    }
    _post(url, content=body, headers=headers)


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


def _send_pagerduty(url: str, routing_key: str, delivery: ChannelDelivery) -> None:
    payload = delivery.payload
    actions = {NotificationKind.OPENED: ["trigger"], NotificationKind.RESOLVED: ["resolve"]}
    # A test opens and at once resolves its own incident, so that it pages nobody for long.
    for action in actions.get(delivery.kind, ["trigger", "resolve"]):  # type: ignore[call-overload]
        event: dict[str, Any] = {"routing_key": routing_key, "event_action": action, "dedup_key": payload["dedup_key"]}
        if action == "trigger":
            event["payload"] = {
                "summary": payload["title"][:1024],
                "source": urlsplit(settings.SITE_URL).hostname or "stream-dashboard",
                "severity": "info" if delivery.kind == NotificationKind.TEST else "error",
                "component": "stream-dashboard",
                "custom_details": payload.get("incident") or {"text": payload["text"]},
            }
            event["links"] = [{"href": href, "text": name} for name, href in payload["links"].items()]
        _post(url, content=_json(event), headers={"Content-Type": "application/json"})


def _send_opsgenie(url: str, api_key: str, delivery: ChannelDelivery) -> None:
    payload = delivery.payload
    headers = {"Content-Type": "application/json", "Authorization": f"GenieKey {api_key}"}
    close = {"source": "stream-dashboard", "note": payload["text"][:25000]}
    close_url = f"{url.rstrip('/')}/{quote(payload['dedup_key'], safe='')}/close?identifierType=alias"
    if delivery.kind == NotificationKind.RESOLVED:
        _post(close_url, content=_json(close), headers=headers)
        return
    alert = {
        "message": payload["title"][:130],
        "alias": payload["dedup_key"],
        "description": payload["text"][:15000],
        "source": "stream-dashboard",
        "details": {k: str(v) for k, v in (payload.get("incident") or {}).items() if v not in (None, "")},
        "priority": "P5" if delivery.kind == NotificationKind.TEST else "P2",
    }
    _post(url, content=_json(alert), headers=headers)
    if delivery.kind == NotificationKind.TEST:
        _post(close_url, content=_json(close), headers=headers)
