"""Making and checking API tokens, and what a caller may do.

A secret is `sdt_` and 43 URL-safe characters (256 random bits). The database holds its first 12
characters (to find the row and to show which token it is) and its SHA-256; the secret itself is shown once,
when the token is made, and never stored or logged. A token never carries more than its user: what a call
may do is the token's scopes intersected with the user's role, both read on every request, so a user who
loses a permission loses it through every token at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from dashboard.accounts.access import can_view_dashboard, is_staff_member
from dashboard.actions.services import can_act
from dashboard.api.models import ACT, ADMIN, READ, ApiToken
from dashboard.client_address import client_address

SECRET_PREFIX = "sdt_"
PREFIX_LENGTH = 12
ALL_SCOPES = frozenset({READ, ACT, ADMIN})


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    user: Any, name: str, scopes: list[str], expires_at: datetime, created_by: str = ""
) -> tuple[ApiToken, str]:
    """A new token and its secret, which exists only in this return value."""
    unknown = set(scopes) - ALL_SCOPES
    if unknown or not scopes:
        raise ValueError(f"scopes must be some of {', '.join(sorted(ALL_SCOPES))}")
    if expires_at > timezone.now() + timedelta(days=settings.API_TOKEN_MAX_DAYS):
        raise ValueError(f"a token expires within {settings.API_TOKEN_MAX_DAYS} days")
    for _ in range(3):
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        try:
            with transaction.atomic():
                token = ApiToken.objects.create(
                    name=name, user=user, scopes=sorted(set(scopes)), prefix=secret[:PREFIX_LENGTH],
                    digest=digest_of(secret), expires_at=expires_at, created_by=created_by,
                )
            return token, secret
        except IntegrityError:
            # Two secrets sharing their first 12 characters (1 in 2**48): draw again.
            continue
    raise RuntimeError("could not draw a unique token")


class TokenRefused(Exception):
    """A bearer token that does not let its holder in; the message says why, never the secret."""


def token_of(secret: str) -> ApiToken:
    """The usable token this secret opens, or TokenRefused."""
    if not secret.startswith(SECRET_PREFIX) or len(secret) > 100:
        raise TokenRefused("This is not an API token of this dashboard.")
    token = ApiToken.objects.select_related("user").filter(prefix=secret[:PREFIX_LENGTH]).first()
    # The digest is compared in constant time even when no row matched, so timing tells nothing.
    expected = token.digest if token is not None else "0" * 64
    if not hmac.compare_digest(digest_of(secret), expected) or token is None:
        raise TokenRefused("Unknown token.")
    if token.revoked_at is not None:
        raise TokenRefused("This token was revoked.")
    if token.expires_at <= timezone.now():
        raise TokenRefused("This token has expired.")
    if not token.user.is_active:
        raise TokenRefused("The token's user is inactive.")
    return token


def record_use(token: ApiToken, request: HttpRequest) -> None:
    now = timezone.now()
    address = client_address(request)[:64]
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now, last_used_from=address)
    token.last_used_at, token.last_used_from = now, address


@dataclass(frozen=True)
class Caller:
    """Who calls the API: a user, through a token or their browser session."""

    user: Any
    token: ApiToken | None = None

    @property
    def scopes(self) -> frozenset[str]:
        # A session is the user at the pages: every scope, bounded by the role like a token.
        return frozenset(self.token.scopes) if self.token is not None else ALL_SCOPES

    @property
    def actor(self) -> str:
        """The name written to audit rows: "alice (token deploy-bot)"."""
        name = self.user.get_username()
        return f"{name} (token {self.token.name})" if self.token is not None else name

    def __str__(self) -> str:
        # The rate limit's key (ninja's throttles hash str(request.auth)): per token, or per user.
        return f"token:{self.token.pk}" if self.token is not None else f"user:{self.user.pk}"


@dataclass(frozen=True)
class Need:
    """What an endpoint needs: a scope of the token, and a permission of the user as the pages check it."""

    scope: str
    check: Callable[[Any], bool]
    permission: str


VIEW = Need(READ, can_view_dashboard, "the viewer role (accounts.view_dashboard)")
MANAGE = Need(ACT, is_staff_member, "the staff role (accounts.manage_dashboard)")
ACT_AT_PROVIDER = Need(
    ACT, can_act, "the permission to act at the provider (actions.act_at_provider), or writes are off (PROVIDER_WRITES)"
)


def missing(caller: Caller, need: Need) -> str:
    """Why the caller may not, or "" when they may."""
    if need.scope not in caller.scopes:
        return f"The token lacks the scope `{need.scope}`."
    if not need.check(caller.user):
        return f"The user lacks {need.permission}."
    return ""
AUDIT = Need(
    READ,
    lambda user: bool(user.is_active and user.has_perm("actions.view_provideraction")),
    "the permission to see actions at the provider (actions.view_provideraction)",
)
# Confirming or cancelling an action also needs seeing it, as on its page.
AUDIT_ACT = Need(ACT, AUDIT.check, AUDIT.permission)
