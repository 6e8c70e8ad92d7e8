from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from dashboard.accounts.roles import STAFF
from dashboard.alerts.workflow import MUTE_CHOICES


class MuteForm(forms.Form):
    minutes = forms.TypedChoiceField(choices=MUTE_CHOICES, coerce=int)


def assignable_users() -> QuerySet[User]:
    """Who can own an incident: active staff (the Staff role, or superusers)."""
    return (
        User.objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=STAFF))
        .distinct()
        .order_by("username")
    )


class AssignForm(forms.Form):
    assignee = forms.ModelChoiceField(queryset=User.objects.none(), required=False, empty_label="nobody")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["assignee"].queryset = assignable_users()  # type: ignore[attr-defined]


class NoteForm(forms.Form):
    text = forms.CharField(max_length=5000, strip=True, widget=forms.Textarea(attrs={"rows": 3}))


class SnoozeForm(forms.Form):
    minutes = forms.TypedChoiceField(choices=MUTE_CHOICES, coerce=int)
