"""Evaluate alert rules and send pending mails and channel messages from the command line, without Celery.

`manage.py sendalerts --once` runs one sweep (conditions, grace periods, digests, lost mails) and sends
what it produced, then every channel message that is due; without --once it repeats every ALERT_SWEEP_SECONDS.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from dashboard.alerts import channels, evaluate, mail


class Command(BaseCommand):
    help = "Evaluate alert rules and send the resulting mails."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run one sweep and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            while True:
                for notification_id in evaluate.sweep():
                    try:
                        outcome = mail.send_notification(notification_id)
                    except mail.TransientSendError as exc:
                        outcome = f"will retry ({exc})"
                    self.stdout.write(f"notification {notification_id}: {outcome}")
                for delivery_id in channels.to_dispatch():
                    try:
                        outcome = channels.send_delivery(delivery_id)
                    except mail.TransientSendError as exc:
                        outcome = f"will retry ({exc})"
                    self.stdout.write(f"channel message {delivery_id}: {outcome}")
                if options["once"]:
                    return
                time.sleep(settings.ALERT_SWEEP_SECONDS)
        except KeyboardInterrupt:
            # A mail is claimed before it is sent; one interrupted mid-send is picked up by the next sweep.
            self.stdout.write("stopped")
