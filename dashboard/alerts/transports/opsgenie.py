"""Opsgenie's Alert API: our incident's key as the alert's alias, so the close finds the alert from any process
(Apprise's close looks request ids up in a store local to the process that created the alert)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from dashboard.alerts.models import ChannelMessage, NotificationKind
from dashboard.alerts.transports import Transport, post

OPSGENIE_ALERTS_URL = "https://api.opsgenie.com/v2/alerts"


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


class OpsgenieTransport(Transport[ChannelMessage]):
    def __init__(self, url: str, api_key: str) -> None:
        super().__init__([url, api_key])
        self.url, self.api_key = url or OPSGENIE_ALERTS_URL, api_key

    def send(self, message: ChannelMessage) -> None:
        payload = message.payload
        headers = {"Content-Type": "application/json", "Authorization": f"GenieKey {self.api_key}"}
        close = {"source": "stream-dashboard", "note": payload["text"][:25000]}
        close_url = f"{self.url.rstrip('/')}/{quote(payload['dedup_key'], safe='')}/close?identifierType=alias"
        if message.kind == NotificationKind.RESOLVED:
            post(close_url, content=_json(close), headers=headers)
            return
        alert = {
            "message": payload["title"][:130],
            "alias": payload["dedup_key"],
            "description": payload["text"][:15000],
            "source": "stream-dashboard",
            "details": {k: str(v) for k, v in (payload.get("incident") or {}).items() if v not in (None, "")},
            "priority": "P5" if message.kind == NotificationKind.TEST else "P2",
        }
        post(self.url, content=_json(alert), headers=headers)
        if message.kind == NotificationKind.TEST:
            post(close_url, content=_json(close), headers=headers)
