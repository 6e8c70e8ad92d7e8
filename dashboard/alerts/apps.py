from __future__ import annotations

from typing import Any

from django.apps import AppConfig


def _evaluate_after_poll(sender: Any, **kwargs: Any) -> None:
    from dashboard.alerts.tasks import evaluate_alerts_task

    # Alert on new failures now rather than at the next sweep.
    evaluate_alerts_task.delay()


class AlertsConfig(AppConfig):
    name = "dashboard.alerts"
    label = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from dashboard.polling.signals import failures_stored, stream_status_changed

        # Polling sits below alerts and never imports it: it announces stored failures, alerts listen.
        failures_stored.connect(_evaluate_after_poll, dispatch_uid="alerts-evaluate-after-poll")
        stream_status_changed.connect(_evaluate_after_poll, dispatch_uid="alerts-evaluate-after-stream-sync")
