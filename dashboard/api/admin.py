"""Tokens in the admin: staff make one for a service account (its secret shown once, in the message after
saving), see when and from where each was last used, and revoke it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import render
from django.utils import timezone

from dashboard.api.forms import EXPIRY_CHOICES
from dashboard.api.models import SCOPE_CHOICES, ApiToken
from dashboard.api.tokens import create_token


class NewTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=SCOPE_CHOICES, widget=forms.CheckboxSelectMultiple)
    expires_in_days = forms.TypedChoiceField(choices=EXPIRY_CHOICES, coerce=int, initial=90, label="Expires in")

    class Meta:
        model = ApiToken
        fields = ["name", "user"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.maker: Any = None

    def clean_user(self) -> Any:
        """A token acts as its user: staff make one only for an account that holds no permission they do not
        hold themselves (a superuser's needs a superuser), so nobody gains rights through a token."""
        user = self.cleaned_data["user"]
        maker = self.maker
        if maker is None or maker.is_superuser or user.pk == maker.pk:
            return user
        if user.is_superuser or not user.get_all_permissions() <= maker.get_all_permissions():
            raise forms.ValidationError(
                "This account holds permissions you do not: only a superuser may make a token for it."
            )
        return user


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scopes", "created_at", "expires_at", "last_used_at",
                    "last_used_from", "revoked_at"]
    list_select_related = ["user"]
    search_fields = ["name", "prefix", "user__username"]
    actions = ["revoke"]
    readonly_fields = ["name", "user", "scopes", "prefix", "created_at", "created_by", "expires_at",
                       "last_used_at", "last_used_from", "revoked_at"]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = NewTokenForm
        form = super().get_form(request, obj, change, **kwargs)
        if obj is None:
            maker = request.user

            class Bound(form):  # type: ignore[misc, valid-type]
                def __init__(self, *args: Any, **kw: Any) -> None:
                    super().__init__(*args, **kw)
                    self.maker = maker

            return Bound
        return form

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["name", "user", "scopes", "expires_in_days"]
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        data = form.cleaned_data
        token, secret = create_token(
            data["user"], data["name"], data["scopes"],
            timezone.now() + timedelta(days=data["expires_in_days"]), created_by=request.user.get_username(),
        )
        obj.pk = token.pk
        # Answered by response_add on this same response, never stored (not even in a message cookie).
        request._new_token = (token, secret)  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> Any:
        token, secret = getattr(request, "_new_token", (None, ""))
        if not secret:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "title": "API token created", "token": token,
                   "secret": secret, "opts": self.opts}
        response = render(request, "admin/api/token_created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoked, not deleted: the row says which token wrote which audit line.
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} token(s) revoked.")
