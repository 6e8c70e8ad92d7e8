"""The forms that check a maintenance window and a stream's objectives, for the admin, the configuration
file's import and the API alike; the rules themselves are the models' `clean`."""

from __future__ import annotations

from django import forms

from dashboard.expectations.models import MaintenanceWindow, StreamObjective


class MaintenanceWindowForm(forms.ModelForm):
    class Meta:
        model = MaintenanceWindow
        fields = ("name", "scope", "scope_value", "reason", "starts_at", "ends_at", "cron", "duration_minutes",
                  "time_zone")


class StreamObjectiveForm(forms.ModelForm):
    class Meta:
        model = StreamObjective
        fields = ("stream_id", "delivery", "delivery_target", "latency_seconds", "latency_target", "note")
