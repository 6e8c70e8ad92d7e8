"""Mail: a Notification row's rendered message, sent through Django's mail backend (SMTP in production)."""

from __future__ import annotations

import smtplib
from email.header import Header
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives

from dashboard.alerts.models import Notification, NotificationKind
from dashboard.alerts.transports import SendFailed, Transport


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


class EmailTransport(Transport[Notification]):
    def __init__(self) -> None:
        super().__init__([settings.EMAIL_HOST_PASSWORD])

    def send(self, message: Notification) -> None:
        try:
            as_email(message).send(fail_silently=False)
        except Exception as exc:
            raise SendFailed(f"{type(exc).__name__}: {exc}", transient=is_transient(exc)) from exc
