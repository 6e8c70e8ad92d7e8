from __future__ import annotations

from django import forms

from dashboard.alerts.actions import MUTE_CHOICES


class MuteForm(forms.Form):
    minutes = forms.TypedChoiceField(choices=MUTE_CHOICES, coerce=int)
