"""Admin for sources: the write-only API key, the sync state the poller records, and a connection test."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path

from dashboard.sources.clients import probe_client
from dashboard.sources.defaults import ENVIRONMENT_VARIABLES, managed_by_environment
from dashboard.sources.models import Source
from dashboard.upstream import errors
from dashboard.upstream.client import scrub_key
from dashboard.upstream.history import fetch_history_page

URL_FIELDS = ("streams_base_url", "evm_base_url", "aptos_mainnet_base_url", "aptos_testnet_base_url")
# The form's fields for what the environment sets on its source (`ENVIRONMENT_VARIABLES`).
ENVIRONMENT_FORM_FIELDS = ("new_api_key", *URL_FIELDS)


def set_by_environment(variable: str) -> str:
    return f"Set by {variable} in the environment; change it there and restart."


class SourceForm(forms.ModelForm):
    """The API key is write-only: typed into a password field, never rendered back, not even masked."""

    new_api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=512,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )

    # Declared to pick https for addresses typed without a scheme.
    streams_base_url = forms.URLField(max_length=300, assume_scheme="https")
    evm_base_url = forms.URLField(max_length=300, assume_scheme="https")
    aptos_mainnet_base_url = forms.URLField(max_length=300, assume_scheme="https")
    aptos_testnet_base_url = forms.URLField(max_length=300, assume_scheme="https")

    class Meta:
        model = Source
        fields = ("name", "streams_base_url", "evm_base_url", "aptos_mainnet_base_url", "aptos_testnet_base_url",
                  "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if managed_by_environment(self.instance):
            # Not form fields at all, so nothing posted can change them (the admin shows them read-only).
            for name in ENVIRONMENT_FORM_FIELDS:
                del self.fields[name]
            return
        field = self.fields["new_api_key"]
        if self.instance.pk and self.instance.api_key:
            field.help_text = "A key is stored. Leave this empty to keep it; type a new key to replace it."
        elif self.instance.pk:
            field.help_text = "No key is stored: the poller cannot read this source until one is entered."
        else:
            field.required = True

    def save(self, commit: bool = True) -> Source:
        source: Source = super().save(commit=False)
        new_key = self.cleaned_data.get("new_api_key") if "new_api_key" in self.fields else None
        if new_key:
            source.set_api_key(new_key)
        if commit:
            source.save()
        return source


def test_connection(source: Source) -> tuple[int, str]:
    """Ask the streams host for one history record; return a message level and the answer in words."""
    if not source.api_key:
        return messages.WARNING, f"{source.name}: no API key is stored, nothing was sent."
    try:
        with probe_client(source) as client:
            page = fetch_history_page(client, limit=1)
    except errors.RejectedKey as exc:
        level, text = messages.ERROR, f"rejected key — the upstream refused the API key ({exc.message})"
    except errors.Unreachable as exc:
        level, text = messages.ERROR, f"unreachable — {exc.message}"
    except errors.RateLimited as exc:
        level, text = messages.WARNING, f"rate limited — the key was accepted but calls are throttled ({exc.message})"
    except errors.InvalidRequest as exc:
        level, text = messages.ERROR, f"not sent — {exc.message}"
    except errors.UpstreamError as exc:
        level, text = messages.ERROR, f"upstream error — {exc.message}"
    else:
        total = f"{page.total:,} deliveries in its history" if page.total is not None else "its history"
        level, text = messages.SUCCESS, f"ok — the upstream accepted the key and answered with {total}"
    # The transport scrubs the key from its texts; an upstream echoing it back is scrubbed here too.
    text = scrub_key(text, source.api_key, "[key]")
    return level, f"{source.name} ({source.streams_base_url}): {text}."


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = SourceForm
    change_form_template = "admin/sources/source/change_form.html"
    list_display = ("name", "enabled", "is_default", "streams_base_url", "last_success_at", "last_error_kind",
                    "consecutive_failures")
    list_filter = ("enabled",)
    search_fields = ("name",)
    actions = ("test_connection_action",)
    readonly_fields = (
        "is_default", "created_at", "last_poll_started_at", "last_success_at", "last_error_at", "last_error_kind",
        "last_error_message", "consecutive_failures", "key_rejected_at", "backoff_until", "newest_upstream_date",
        "synced_through", "records_last_poll", "last_revisit_at",
    )
    sync_fieldset = ("Sync state (written by the poller)", {"fields": readonly_fields[1:]})

    def get_fieldsets(self, request: HttpRequest, obj: Source | None = None) -> Any:
        if obj is not None and managed_by_environment(obj):
            return (
                (None, {"fields": ("name", "environment_key", "enabled", "is_default")}),
                ("Base URLs", {"fields": tuple(f"environment_{name}" for name in URL_FIELDS)}),
                self.sync_fieldset,
            )
        return (
            (None, {"fields": ("name", "new_api_key", "enabled", "is_default")}),
            ("Base URLs", {"fields": URL_FIELDS}),
            self.sync_fieldset,
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Source | None = None) -> Any:
        if obj is not None and managed_by_environment(obj):
            return (*self.readonly_fields, "environment_key", *(f"environment_{name}" for name in URL_FIELDS))
        return self.readonly_fields

    @admin.display(description="API key")
    def environment_key(self, source: Source) -> str:
        return set_by_environment(ENVIRONMENT_VARIABLES["api_key"])

    def _environment_url(self, source: Source, name: str) -> str:
        return f"{getattr(source, name)} — {set_by_environment(ENVIRONMENT_VARIABLES[name])}"

    @admin.display(description="Streams base URL")
    def environment_streams_base_url(self, source: Source) -> str:
        return self._environment_url(source, "streams_base_url")

    @admin.display(description="EVM base URL")
    def environment_evm_base_url(self, source: Source) -> str:
        return self._environment_url(source, "evm_base_url")

    @admin.display(description="Aptos mainnet base URL")
    def environment_aptos_mainnet_base_url(self, source: Source) -> str:
        return self._environment_url(source, "aptos_mainnet_base_url")

    @admin.display(description="Aptos testnet base URL")
    def environment_aptos_testnet_base_url(self, source: Source) -> str:
        return self._environment_url(source, "aptos_testnet_base_url")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a source deletes its whole delivery history (and the confirmation page would list it);
        # switch it off with "enabled" instead.
        return False

    @admin.action(description="Test connection to the upstream", permissions=["change"])
    def test_connection_action(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset[:20]:
            level, text = test_connection(source)
            self.message_user(request, text, level)

    def get_urls(self) -> list[Any]:
        test = self.admin_site.admin_view(self.test_connection_view)
        return [path("<int:pk>/test-connection/", test, name="sources_source_test_connection"),
                *super().get_urls()]

    def test_connection_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        source = get_object_or_404(Source, pk=pk)
        if not self.has_change_permission(request, source):
            raise PermissionDenied
        level, text = test_connection(source)
        self.message_user(request, text, level)
        return HttpResponseRedirect(source.get_absolute_url())
