"""A JSON webhook whose body is signed with HMAC-SHA256, for receivers of the team's own."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

from dashboard.alerts.models import ChannelMessage
from dashboard.alerts.transports import Transport, post

SIGNATURE_HEADER = "X-Stream-Dashboard-Signature"
TIMESTAMP_HEADER = "X-Stream-Dashboard-Timestamp"
EVENT_HEADER = "X-Stream-Dashboard-Event"
DELIVERY_HEADER = "X-Stream-Dashboard-Delivery"


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: HMAC-SHA256 of "<timestamp>.<body>" with the channel's secret."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class WebhookTransport(Transport[ChannelMessage]):
    def __init__(self, url: str, secret: str) -> None:
        super().__init__([url, secret])
        self.url, self.secret = url, secret

    def send(self, message: ChannelMessage) -> None:
        body = json.dumps(message.payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "stream-dashboard-alerts",
            EVENT_HEADER: message.payload["event"],
            # The same on every attempt of one message: a receiver can drop a repeat it already has.
            DELIVERY_HEADER: str(message.pk),
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: webhook_signature(self.secret, timestamp, body),
        }
        post(self.url, content=body, headers=headers)
