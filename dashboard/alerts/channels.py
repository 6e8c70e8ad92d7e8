"""Alert channels besides email: Slack, Teams, Discord and the rest through Apprise, a signed JSON webhook,
PagerDuty and Opsgenie — configured here, written here, sent by the outbox through their transports.

Each incident transition writes one ChannelMessage row per channel, in the transaction that writes the
mail's Notification row. This table's part of sending (`ChannelOutbox`): a resolution waits for its opening
to the same channel, a disabled channel sends nothing, and which transport carries each kind.

Apprise speaks some hundred services from one URL each, but it cannot sign a request body, nor resolve what
it opened at PagerDuty (its plugin always sends `trigger`, without a dedup key) or Opsgenie (its close looks
up request ids in a store local to the process that created the alert). Those three are small, documented
HTTP calls (`dashboard.alerts.transports`): the webhook's body carries an HMAC-SHA256 signature, and the
pager services are given our incident's key, so they open and resolve the same incident as we do.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.template.loader import render_to_string

from dashboard import encryption
from dashboard.alerts.messages import EVENTS, alerts_link, incident_payload
from dashboard.alerts.models import (
    APPRISE_KINDS,
    PAGER_KINDS,
    Channel,
    ChannelKind,
    ChannelMessage,
    Incident,
    NotificationKind,
    NotificationStatus,
)
from dashboard.alerts.outbox import Hold, Outbox, register
from dashboard.alerts.transports import Transport
from dashboard.alerts.transports.chat import AppriseTransport, apprise_service
from dashboard.alerts.transports.opsgenie import OpsgenieTransport
from dashboard.alerts.transports.pagerduty import PagerDutyTransport
from dashboard.alerts.transports.webhook import WebhookTransport
from dashboard.deliveries.teams import teams_of_stream
from dashboard.text import visible
from dashboard.times import iso_minutes

# A resolution waits this long for its opening to the same channel (still being retried) before trying again.
WAIT_FOR_OPENING = timedelta(seconds=30)
# Messages that reached (or may yet reach) the channel; a resolution follows only such an opening.
_REACHING = (NotificationStatus.PENDING, NotificationStatus.SENDING, NotificationStatus.SENT)


# --- Configuring a channel -----------------------------------------------------------------------------


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


# --- Writing deliveries at transition time -------------------------------------------------------------


def opening_channels(incident: Incident) -> list[Channel]:
    """Where an opening goes: the rule's enabled channels, and every enabled channel of the teams that own the
    incident's stream; a team's channel never hears of another team's stream, even when a rule names it."""
    owners = {team.pk for team in teams_of_stream(incident.stream_id)} if incident.stream_id else set()
    named = list(incident.rule.channels.filter(enabled=True))
    teams = list(Channel.objects.filter(enabled=True, team__in=owners)) if owners else []
    found = {c.pk: c for c in [*named, *teams] if c.team_id is None or c.team_id in owners}
    return sorted(found.values(), key=lambda c: c.name)


def create_for_transition(
    incident: Incident, kind: str, now: datetime, *, pagers_only: bool = False
) -> list[ChannelMessage]:
    """The rows of one opening or resolution, one per channel; called inside the transition's transaction.

    An opening goes to the rule's enabled channels. A resolution goes to the channels its opening reached
    (or may still reach), whatever the rule says now, so every channel that heard of an incident hears it
    resolved and no other does. `pagers_only` (a rule switched off) still closes pager incidents."""
    rule = incident.rule
    if kind == NotificationKind.OPENED:
        channels = opening_channels(incident)
    else:
        opened = ChannelMessage.objects.filter(
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
                    ChannelMessage.objects.create(
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


def create_test(channel: Channel, now: datetime) -> ChannelMessage:
    links = {"alerts": alerts_link()}
    text = render_to_string("alerts/channels/test.txt", {"channel": channel, "now": now, "links": links})
    payload = {
        "event": EVENTS[NotificationKind.TEST],
        "title": f"[TEST] Alert channel “{visible(channel.name)}”",
        "text": text,
        "dedup_key": f"stream-dashboard-test-{channel.pk}-{int(now.timestamp())}",
        "incident": None,
        "links": links,
    }
    return ChannelMessage.objects.create(
        channel=channel,
        kind=NotificationKind.TEST,
        payload=payload,
        created_at=now,
        next_attempt_at=now,
    )


# --- Sending -------------------------------------------------------------------------------------------


def _opening_state(delivery: ChannelMessage) -> str | None:
    if delivery.incident_id is None:
        return None
    return (
        ChannelMessage.objects.filter(
            incident_id=delivery.incident_id, channel_id=delivery.channel_id, kind=NotificationKind.OPENED
        )
        .values_list("status", flat=True)
        .first()
    )


# The transports that take the channel's URL and secret; the Apprise kinds take the URL alone.
_SIGNED_TRANSPORTS: dict[str, type[WebhookTransport | PagerDutyTransport | OpsgenieTransport]] = {
    ChannelKind.WEBHOOK: WebhookTransport,
    ChannelKind.PAGERDUTY: PagerDutyTransport,
    ChannelKind.OPSGENIE: OpsgenieTransport,
}


def transport_for(channel: Channel) -> Transport[ChannelMessage]:
    url, secret = encryption.decrypt(channel.url_encrypted), encryption.decrypt(channel.secret_encrypted)
    if channel.kind in APPRISE_KINDS:
        return AppriseTransport(url)
    if channel.kind in _SIGNED_TRANSPORTS:
        return _SIGNED_TRANSPORTS[channel.kind](url, secret)
    raise ValueError(f"unknown channel kind {channel.kind!r}")


class ChannelOutbox(Outbox[ChannelMessage]):
    name = "channel"
    model = ChannelMessage

    def rows(self):  # type: ignore[no-untyped-def]
        return ChannelMessage.objects.select_related("channel")

    def gate(self, row: ChannelMessage, now: datetime) -> Hold | None:
        if row.kind == NotificationKind.RESOLVED:
            opening = _opening_state(row)
            if opening in (NotificationStatus.PENDING, NotificationStatus.SENDING):
                # A resolution overtaking its opening would leave a pager incident open: wait for the opening.
                return Hold(NotificationStatus.PENDING, row.error, now + WAIT_FOR_OPENING)
            if opening != NotificationStatus.SENT:
                return Hold(NotificationStatus.SKIPPED, "the opening never reached this channel")
        if not row.channel.enabled:
            return Hold(NotificationStatus.SKIPPED, "channel disabled")
        return None

    def transport(self, row: ChannelMessage) -> Transport[ChannelMessage]:
        return transport_for(row.channel)

    def describe(self, row: ChannelMessage) -> str:
        return f"{row.payload.get('title', '')} ({visible(row.channel.name)})"

    def on_attempt(self, row: ChannelMessage, now: datetime, *, ok: bool, result: str) -> None:
        Channel.objects.filter(pk=row.channel_id).update(
            last_attempt_at=now, last_attempt_ok=ok, last_attempt_result=result[:500]
        )

    def on_sent(self, row: ChannelMessage, now: datetime) -> list[int]:
        """After an opening went out: the resolution to the same channel that waited for it, made due now."""
        if row.kind != NotificationKind.OPENED or row.incident_id is None:
            return []
        waiting = ChannelMessage.objects.filter(
            incident_id=row.incident_id,
            channel_id=row.channel_id,
            kind=NotificationKind.RESOLVED,
            status=NotificationStatus.PENDING,
        )
        ids = list(waiting.values_list("pk", flat=True))
        if ids:
            waiting.update(next_attempt_at=now)
        return ids


CHANNELS = register(ChannelOutbox())
