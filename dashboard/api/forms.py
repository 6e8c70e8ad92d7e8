from __future__ import annotations

from django import forms
from django.conf import settings

from dashboard.api.models import SCOPE_CHOICES

EXPIRY_CHOICES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (180, "180 days"), (365, "1 year")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="What the token is for, e.g. deploy-bot; audit rows name it.")
    scopes = forms.MultipleChoiceField(choices=SCOPE_CHOICES, widget=forms.CheckboxSelectMultiple,
                                       initial=["read"])
    expires_in_days = forms.TypedChoiceField(choices=EXPIRY_CHOICES, coerce=int, initial=90, label="Expires in")

    def clean_expires_in_days(self) -> int:
        days: int = self.cleaned_data["expires_in_days"]
        if days > settings.API_TOKEN_MAX_DAYS:
            raise forms.ValidationError(f"A token expires within {settings.API_TOKEN_MAX_DAYS} days.")
        return days
