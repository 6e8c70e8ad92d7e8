"""Slack, Teams, Discord and the hundred other services Apprise speaks, each from one URL."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import apprise

from dashboard.alerts.models import ChannelMessage, NotificationKind
from dashboard.alerts.transports import SendFailed, Transport


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
def captured_apprise_log() -> Iterator[_ThreadLog]:
    handler = _ThreadLog()
    logger = logging.getLogger("apprise")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def apprise_service(url: str) -> str | None:
    """The service Apprise reads from a URL (its own scheme or the service's webhook URL), None if none."""
    with captured_apprise_log():
        plugin = apprise.Apprise.instantiate(url)
    return None if plugin is None else str(plugin.service_name)


_APPRISE_TYPES = {
    NotificationKind.OPENED: apprise.NotifyType.FAILURE,
    NotificationKind.RESOLVED: apprise.NotifyType.SUCCESS,
}


class AppriseTransport(Transport[ChannelMessage]):
    def __init__(self, url: str) -> None:
        super().__init__([url])
        self.url = url

    def send(self, message: ChannelMessage) -> None:
        with captured_apprise_log() as captured:
            notifier = apprise.Apprise()
            if not notifier.add(self.url):
                raise SendFailed("Apprise does not recognise the channel's URL", transient=False)
            ok = notifier.notify(
                title=message.payload["title"],
                body=message.payload["text"],
                notify_type=_APPRISE_TYPES.get(message.kind, apprise.NotifyType.INFO),  # type: ignore[call-overload]
                body_format=apprise.NotifyFormat.TEXT,
            )
        if not ok:
            # Apprise does not say whether a failure is worth retrying: every one is, a bounded number of times.
            raise SendFailed(" ".join(captured.lines) or "the service did not accept the message", transient=True)
