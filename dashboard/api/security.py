"""How a call is let in: a bearer token (no CSRF: the header is not sent by browsers on their own), or the
browser session of a logged-in user (CSRF on unsafe methods, as on the pages); then the rate limit per token."""

from __future__ import annotations

from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security.http import HttpBearer
from ninja.throttling import SimpleRateThrottle
from ninja.utils import check_csrf

from dashboard import visibility
from dashboard.accounts.access import viewer_required
from dashboard.api.problems import Problem, problem_response, unauthorized
from dashboard.api.tokens import VIEW, Caller, Need, TokenRefused, missing, record_use, token_of
from dashboard.deliveries.teams import visibility_for


class TokenOrSession(HttpBearer):
    """`Authorization: Bearer sdt_…`, else the session. Never logs the header (ninja's own bearer logs an
    unexpected one in DEBUG)."""

    # Tells the docs page (Swagger UI) to send the CSRF token with a session's POST.
    csrf = True

    def __call__(self, request: HttpRequest) -> Caller | None:
        header = request.headers.get("Authorization")
        if header:
            scheme, _, secret = header.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise AuthenticationError(message="The Authorization header must be `Bearer <token>`.")
            return self.authenticate(request, secret.strip())
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if request.method not in ("GET", "HEAD", "OPTIONS", "TRACE"):
            refused = check_csrf(request)
            if refused is not None:
                raise Problem(403, "CSRF check failed: a session call that changes something needs the CSRF "
                              "token (X-CSRFToken), as the pages send it.", kind="csrf")
        return Caller(user)

    def authenticate(self, request: HttpRequest, token: str) -> Caller:
        try:
            found = token_of(token)
        except TokenRefused as exc:
            raise AuthenticationError(message=str(exc)) from None
        record_use(found, request)
        # Pages and audit rows see the token's user, and every read is narrowed to the streams it sees.
        request.user = found.user
        visibility.enter(visibility_for(found.user))
        return Caller(found.user, found)


class PerTokenThrottle(SimpleRateThrottle):
    """ninja's cache-backed throttle (the Django cache is Redis), API_RATE_PER_MINUTE calls a minute per
    token (a session counts as its user)."""

    scope = "api"

    def __init__(self) -> None:
        super().__init__(rate="1/m")

    def allow_request(self, request: HttpRequest) -> bool:
        # Read on every call, so a changed setting (tests, a reload) holds at once.
        self.num_requests, self.duration = settings.API_RATE_PER_MINUTE, 60
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str | None:
        caller = getattr(request, "auth", None)
        return f"api-rate:{caller}" if caller is not None else None

    def wait(self) -> float | None:
        # The oldest call in the window leaves it after this long; the client may call again then.
        oldest = self.history[-1] if self.history else self.now
        return max(1.0, self.duration - (self.now - oldest))  # type: ignore[operator]


def allow(request: HttpRequest, need: Need) -> Caller:
    """The caller, if the token's scope and the user's role both allow this endpoint; 403 naming what is
    missing otherwise. Checked on every call: a role taken away is gone through every token at once."""
    caller: Any = getattr(request, "auth", None)
    if not isinstance(caller, Caller):
        raise AuthenticationError()
    why = missing(caller, need)
    if why:
        raise Problem(403, why, kind="forbidden")
    return caller


def docs_access(view: Any) -> Any:
    """The OpenAPI document and the docs page: a bearer token with `read` (scripts fetch the document), else a
    logged-in viewer as on every page."""
    page = viewer_required(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not request.headers.get("Authorization"):
            return page(request, *args, **kwargs)
        try:
            caller = TokenOrSession()(request)
        except AuthenticationError as exc:
            return unauthorized(request, exc.message)
        if caller is None:
            return unauthorized(request, "Authentication required.")
        why = missing(caller, VIEW)
        if why:
            return problem_response(request, 403, why, kind="forbidden")
        return view(request, *args, **kwargs)

    return wrapped
