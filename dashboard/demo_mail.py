"""The demo's mail backend: one line in the console per mail, naming its subject, its recipients and the page
to read it on, where Django's console backend would print the whole MIME message (tens of kilobytes a minute
once the simulator's incidents open). The demo's launcher selects it when no SMTP server is configured."""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

# The incident pages an alert mail links to (alerts/urls.py); a digest links to several, a test mail to none.
INCIDENT_LINK = re.compile(r"https?://\S+/alerts/incidents/\d+/")
ANY_LINK = re.compile(r"https?://\S+")


def summary(message: EmailMessage) -> str:
    """`[mail] "<subject>" to <recipients>: <link>`, the link being the mail's incident page when it has one."""
    body = message.body if isinstance(message.body, str) else ""
    incidents = list(dict.fromkeys(INCIDENT_LINK.findall(body)))
    if incidents:
        link = incidents[0] + (f" (and {len(incidents) - 1} more incidents)" if len(incidents) > 1 else "")
    else:
        links = ANY_LINK.findall(body)
        link = links[-1] if links else "no link"
    recipients = ", ".join(message.recipients()) or "nobody"
    return f'[mail] "{message.subject}" to {recipients}: {link}'


class EmailBackend(BaseEmailBackend):
    def __init__(self, *args: Any, stream: TextIO | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The real standard output: a Celery worker turns sys.stdout into warnings of its logger.
        self.stream = stream or sys.__stdout__ or sys.stdout
        self._lock = threading.Lock()

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        sent = 0
        with self._lock:
            for message in email_messages:
                if not message.recipients():
                    continue
                self.stream.write(summary(message) + "\n")
                sent += 1
            self.stream.flush()
        return sent
