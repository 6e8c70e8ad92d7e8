"""PagerDuty's Events API v2: our incident's key as the dedup key, so PagerDuty opens and resolves the same
incident as we do (Apprise's plugin always sends `trigger`, without a key)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from dashboard.alerts.models import ChannelMessage, NotificationKind
from dashboard.alerts.transports import Transport, post

PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


class PagerDutyTransport(Transport[ChannelMessage]):
    def __init__(self, url: str, routing_key: str) -> None:
        super().__init__([url, routing_key])
        self.url, self.routing_key = url or PAGERDUTY_EVENTS_URL, routing_key

    def send(self, message: ChannelMessage) -> None:
        payload = message.payload
        actions = {NotificationKind.OPENED: ["trigger"], NotificationKind.RESOLVED: ["resolve"]}
        # A test opens and at once resolves its own incident, so that it pages nobody for long.
        for action in actions.get(message.kind, ["trigger", "resolve"]):  # type: ignore[call-overload]
            event: dict[str, Any] = {
                "routing_key": self.routing_key, "event_action": action, "dedup_key": payload["dedup_key"],
            }
            if action == "trigger":
                event["payload"] = {
                    "summary": payload["title"][:1024],
                    "source": urlsplit(settings.SITE_URL).hostname or "stream-dashboard",
                    "severity": "info" if message.kind == NotificationKind.TEST else "error",
                    "component": "stream-dashboard",
                    "custom_details": payload.get("incident") or {"text": payload["text"]},
                }
                event["links"] = [{"href": href, "text": name} for name, href in payload["links"].items()]
            post(self.url, content=json.dumps(event, ensure_ascii=False).encode(),
                 headers={"Content-Type": "application/json"})
