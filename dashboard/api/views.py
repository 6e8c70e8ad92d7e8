"""The user's own API tokens: make one (its secret shown once), list them, revoke one after a confirmation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache

from dashboard.accounts.access import viewer_required
from dashboard.api.forms import TokenForm
from dashboard.api.models import ApiToken
from dashboard.api.tokens import create_token


def _own(request: HttpRequest) -> QuerySet[ApiToken]:
    user: Any = request.user
    return ApiToken.objects.filter(user=user)


@viewer_required
@never_cache
def token_list(request: HttpRequest) -> HttpResponse:
    secret = ""
    created = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        created, secret = create_token(
            request.user, data["name"], data["scopes"], timezone.now() + timedelta(days=data["expires_in_days"]),
            created_by=request.user.get_username(),
        )
        form = TokenForm()
    context = {
        "title": "API tokens",
        "form": form,
        "tokens": _own(request),
        # Shown on this answer only: the database keeps the digest, and the page is not cached.
        "secret": secret,
        "created": created,
    }
    return render(request, "api/tokens.html", context, status=400 if form.errors else 200)


@viewer_required
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = _own(request).filter(pk=token_id).first()
    if token is None:
        raise Http404("No token of yours with this id.")
    if request.method == "POST":
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        return redirect("api-tokens:list")
    return render(request, "api/token_revoke.html", {"title": "Revoke token", "token": token})
