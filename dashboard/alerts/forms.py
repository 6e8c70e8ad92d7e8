from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import validate_email
from django.db.models import Q, QuerySet

from dashboard import encryption
from dashboard.accounts.roles import STAFF
from dashboard.alerts import channels
from dashboard.alerts.models import AlertRule, Channel, Condition, Scope
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


# A missing-blocks rule's shortest window: the completeness audit's finds come once a day.
MISSING_MIN_WINDOW = 1440


class AlertRuleForm(forms.ModelForm):
    class Meta:
        model = AlertRule
        fields = (
            "name",
            "enabled",
            "recipients",
            "channels",
            "digest",
            "muted_until",
            "scope",
            "scope_value",
            "condition",
            "window_minutes",
            "threshold_percent",
            "min_deliveries",
            "latency_seconds",
            "quiet_probability",
            "consecutive_failures",
            "stale_minutes",
            "grace_minutes",
            "cooldown_minutes",
        )

    def clean_recipients(self) -> str:
        recipients: str = self.cleaned_data["recipients"]
        for address in (a.strip() for a in recipients.replace("\n", ",").split(",")):
            if address:
                validate_email(address)
        return recipients

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("condition") == Condition.POLLER_STALE and data.get("scope") != Scope.ALL:
            raise ValidationError(
                {"scope": "The poller-stale condition watches every source; choose Everything."}
            )
        if data.get("condition") == Condition.MISSING_BLOCKS and (data.get("window_minutes") or 0) < MISSING_MIN_WINDOW:
            raise ValidationError({"window_minutes": (
                f"Missing blocks: at least {MISSING_MIN_WINDOW} minutes (a day). The completeness audit runs once a "
                "day, and a block found longer ago than the window no longer holds the incident open, recovered or "
                "not."
            )})
        if data.get("scope") != Scope.ALL and not data.get("scope_value"):
            raise ValidationError({"scope_value": "Name the stream id, tag or webhook URL the rule is for."})
        return data


class ChannelForm(forms.ModelForm):
    """URL and secret are write-only: typed into password fields, stored encrypted, never rendered back."""

    new_url = forms.CharField(
        label="URL",
        required=False,
        strip=True,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Slack, Teams, Discord: the webhook URL the service gives you, or any Apprise URL "
        "(slack://…, msteams://…, discord://…, json://…). Webhook: the URL to POST to. PagerDuty, Opsgenie: "
        "empty for the service's API (US region), or its endpoint (e.g. https://api.eu.opsgenie.com/v2/alerts).",
    )
    new_secret = forms.CharField(
        label="Secret",
        required=False,
        strip=True,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Webhook: the signing secret (16 characters or more). PagerDuty: the Events API v2 "
        "integration's routing key. Opsgenie: the API integration's key. Unused by the other kinds.",
    )

    class Meta:
        model = Channel
        fields = ("name", "kind", "enabled", "team")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            stored = "A URL is stored" if self.instance.url_encrypted else "No URL is stored"
            self.fields["new_url"].help_text = (
                f"{stored}{f' ({self.instance.url_hint})' if self.instance.url_hint else ''}: leave empty to "
                f"keep it, type a new one to replace it. " + str(self.fields["new_url"].help_text)
            )
            stored = "A secret is stored" if self.instance.secret_encrypted else "No secret is stored"
            self.fields["new_secret"].help_text = (
                f"{stored}: leave empty to keep it. " + str(self.fields["new_secret"].help_text)
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if not kind:
            return data
        new_url, new_secret = data.get("new_url") or "", data.get("new_secret") or ""
        try:
            if new_url or new_secret:
                encryption.encrypt("probe")  # no key configured: say so here rather than fail on save
            # What the channel would use: the new values, or those stored. Decrypted only to be checked.
            url = new_url or (encryption.decrypt(self.instance.url_encrypted) if self.instance.pk else "")
            secret = new_secret or (
                encryption.decrypt(self.instance.secret_encrypted) if self.instance.pk else ""
            )
        except (encryption.UnreadableSecret, ImproperlyConfigured) as exc:
            raise ValidationError(str(exc)) from None
        errors = channels.check_settings(kind, url, secret)
        if errors:
            raise ValidationError(errors)
        return data

    def save(self, commit: bool = True) -> Channel:
        channel: Channel = super().save(commit=False)
        changed_kind = "kind" in self.changed_data
        url = self.cleaned_data.get("new_url") or None
        if url is None and changed_kind and channel.url_encrypted:
            # The hint names the service the kind reads from the URL.
            url = encryption.decrypt(channel.url_encrypted)
        channels.store_settings(channel, url=url, secret=self.cleaned_data.get("new_secret") or None)
        if commit:
            channel.save()
        return channel
