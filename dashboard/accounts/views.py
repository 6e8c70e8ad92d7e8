"""The login page (password form and the identity provider's button), the OpenID Connect start and
callback, and logging out (which also ends the provider's session when it offers that)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.views.decorators.http import require_POST
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from dashboard.accounts import oidc


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["oidc_provider_name"] = settings.OIDC_PROVIDER_NAME if oidc.enabled() else ""
        # With LOCAL_LOGIN off the form is shown only on ?local=1 (the break-glass accounts' way in).
        context["password_form_shown"] = (
            settings.LOCAL_LOGIN or self.request.method == "POST" or "local" in self.request.GET
        )
        context["local_login"] = settings.LOCAL_LOGIN
        return context


def refused(request: HttpRequest, reason: str, status: int = 403) -> HttpResponse:
    return render(
        request, "registration/sign_in_refused.html",
        {"reason": reason, "provider_name": settings.OIDC_PROVIDER_NAME}, status=status,
    )


class SignInStart(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Redirects to the provider's authorization endpoint with state, nonce and the PKCE challenge."""

    def __init__(self, **kwargs: Any) -> None:
        # The library reads the endpoint here; it is discovered per request instead.
        View.__init__(self, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc.provider().authorization_endpoint
        except oidc.ProviderUnavailable as exc:
            return refused(request, exc.reason, exc.status)
        response: HttpResponse = super().get(request)
        return response


class SignInCallback(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """The provider's redirect back: the library checks the state and exchanges the code; every refusal is
    a page that says why, never a server error."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404
        try:
            response: HttpResponse = super().get(request)
        except oidc.SignInRefused as exc:
            return refused(request, exc.reason, exc.status)
        except SuspiciousOperation:
            return refused(
                request, "This sign-in was not started in this browser, or it was already used (its state is "
                "unknown). Start again.", 400,
            )
        except requests.RequestException as exc:
            status = getattr(exc.response, "status_code", None)
            reason = "The identity provider refused the sign-in" if status else "The identity provider cannot be reached"
            return refused(request, f"{reason} ({type(exc).__name__}{f', HTTP {status}' if status else ''}).", 502)
        return response

    def login_failure(self) -> HttpResponse:
        error = self.request.GET.get("error")
        if error:
            detail = self.request.GET.get("error_description") or error
            return refused(self.request, f"The identity provider did not sign you in: {detail[:300]}")
        return refused(
            self.request, "This sign-in was not started in this browser, or it was already used. Start again.", 400
        )


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """Ends the session here; after a provider sign-in, also at the provider when it names an
    `end_session_endpoint` (RP-initiated logout), which sends the browser back to the login page."""
    id_token = request.session.get("oidc_id_token")
    auth.logout(request)
    back = resolve_url(settings.LOGOUT_REDIRECT_URL)
    if id_token and oidc.enabled():
        try:
            end_session = oidc.provider().end_session_endpoint
        except oidc.ProviderUnavailable:
            end_session = ""
        if end_session:
            query = urlencode({
                "id_token_hint": id_token,
                "client_id": settings.OIDC_RP_CLIENT_ID,
                "post_logout_redirect_uri": request.build_absolute_uri(back),
            })
            return HttpResponseRedirect(f"{end_session}{'&' if '?' in end_session else '?'}{query}")
    return HttpResponseRedirect(back)
