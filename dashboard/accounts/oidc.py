"""Sign-in with the company's identity provider (OpenID Connect), through mozilla-django-oidc.

The library runs the authorization code flow (state, nonce and the PKCE verifier kept per sign-in in the
session, each used once); this module adds what it leaves to the project:
- the provider's endpoints and keys from its discovery document (`OIDC_DISCOVERY_URL`), read when a sign-in
  starts and kept for an hour, never at start-up, so a provider that is down stops only its own sign-ins;
- the ID token checked in full: signature against the provider's published keys (asymmetric algorithms
  only), issuer, audience (and `azp` when several audiences are named), expiry, issue time, nonce;
- users matched by the token's (issuer, `sub`), never by e-mail, so a renamed account stays one user and an
  identity never takes over a local account of the same name;
- the role re-read from the groups claim at every sign-in (`OIDC_ROLE_MAP`); a disabled user is refused.

Imports no app: the identities are this app's own model.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from dashboard.accounts.roles import ROLES, TEAM_MEMBERS, assign_role, clear_role

logger = logging.getLogger(__name__)

DISCOVERY_TTL_SECONDS = 3600
# Clocks of the provider and of this host may differ this much.
CLOCK_SKEW_SECONDS = 60
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class SignInRefused(Exception):
    """A sign-in that is refused for a reason the person should read (shown on the refusal page)."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class ProviderUnavailable(SignInRefused):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, status=502)


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str
    end_session_endpoint: str
    signing_algorithms: tuple[str, ...]
    # The client's secret goes in an Authorization: Basic header unless the provider takes it in the form.
    secret_in_header: bool


_discovered: dict[str, tuple[float, Provider]] = {}
_discovery_lock = threading.Lock()


def enabled() -> bool:
    return bool(settings.OIDC_DISCOVERY_URL)


def provider() -> Provider:
    """The provider's endpoints from its discovery document, fetched once an hour."""
    url = settings.OIDC_DISCOVERY_URL
    with _discovery_lock:
        cached = _discovered.get(url)
        if cached is not None and time.monotonic() - cached[0] < DISCOVERY_TTL_SECONDS:
            return cached[1]
    found = _discover(url)
    with _discovery_lock:
        _discovered[url] = (time.monotonic(), found)
    return found


def forget_discovery() -> None:
    with _discovery_lock:
        _discovered.clear()


def _discover(url: str) -> Provider:
    try:
        answer = httpx.get(url, timeout=settings.OIDC_TIMEOUT, follow_redirects=True)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        logger.warning("OpenID Connect discovery at %s failed: %s", url, exc)
        raise ProviderUnavailable(
            f"The identity provider's discovery document ({url}) could not be read: {type(exc).__name__}."
        ) from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"The identity provider's discovery document ({url}) is not a JSON object.")
    missing = [k for k in ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(k)]
    if missing:
        raise ProviderUnavailable(f"The identity provider's discovery document ({url}) lacks {', '.join(missing)}.")
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    return Provider(
        issuer=str(document["issuer"]),
        authorization_endpoint=str(document["authorization_endpoint"]),
        token_endpoint=str(document["token_endpoint"]),
        jwks_uri=str(document["jwks_uri"]),
        userinfo_endpoint=str(document.get("userinfo_endpoint") or ""),
        end_session_endpoint=str(document.get("end_session_endpoint") or ""),
        signing_algorithms=tuple(a for a in offered if a in ASYMMETRIC),
        # The specification's default when the document names none: client_secret_basic.
        secret_in_header="client_secret_post" not in (
            document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        ),
    )


# --- groups → role (and, later, teams) ---------------------------------------------------------------


@dataclass(frozen=True)
class Membership:
    """What the groups claim grants: a role (None: no access), the teams (OIDC_TEAM_MAP) and the groups
    themselves."""

    role: str | None
    groups: tuple[str, ...]
    teams: tuple[str, ...] = ()


def claimed_groups(claims: dict[str, Any], claim: str) -> tuple[str, ...]:
    """The groups claim as a tuple of names; a dotted name reads a nested claim (Keycloak's
    `realm_access.roles`)."""
    value: Any = claims
    for part in claim.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(g) for g in value if isinstance(g, (str, int)))
    return ()


def membership(claims: dict[str, Any]) -> Membership:
    """The highest role any of the user's groups maps to (Staff above Viewers above Team members), and the
    teams they map to. A user whose groups map to a team and to no role is a team member."""
    groups = claimed_groups(claims, settings.OIDC_GROUPS_CLAIM)
    role_map: dict[str, str] = settings.OIDC_ROLE_MAP
    team_map: dict[str, str] = settings.OIDC_TEAM_MAP
    roles = {role_map[g] for g in groups if g in role_map}
    teams = tuple(sorted({team_map[g] for g in groups if g in team_map}))
    if not roles and teams:
        roles = {TEAM_MEMBERS}
    role = max(roles, key=ROLES.index) if roles else None
    return Membership(role=role, groups=groups, teams=teams)


def apply_membership(user: Any, granted: Membership) -> None:
    if settings.OIDC_TEAM_MAP:
        set_provider_teams(user, granted.teams)
    # A superuser is made by hand and keeps its rights whatever the provider says.
    if user.is_superuser:
        return
    if settings.OIDC_ROLE_MAP:
        if granted.role is None:
            clear_role(user)
        else:
            assign_role(user, granted.role)
    elif granted.teams and not user.groups.filter(name__in=ROLES).exists():
        # Without a role map roles are given by hand and kept; a user with none whose groups name a team can
        # at least read that team's streams.
        assign_role(user, TEAM_MEMBERS)


def set_provider_teams(user: Any, names: tuple[str, ...]) -> None:
    """The user's teams from the identity provider become exactly `names` (a team named for the first time is
    made, owning no stream yet); teams given by hand stay."""
    from dashboard.accounts.models import Team, TeamMembership

    teams = [Team.objects.get_or_create(name=name)[0] for name in names]
    TeamMembership.objects.filter(user=user, from_identity_provider=True).exclude(team__in=teams).delete()
    for team in teams:
        TeamMembership.objects.get_or_create(team=team, user=user, defaults={"from_identity_provider": True})


# --- the backend ------------------------------------------------------------------------------------


class OidcBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    """mozilla-django-oidc's backend with the endpoints discovered, the ID token checked in full and users
    matched by (issuer, sub)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The library reads fixed endpoints here; they are discovered only when a sign-in runs, so a password
        # login never waits for the provider.
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_IDP_SIGN_KEY = None

    def get_settings(self, attr: str, *args: Any) -> Any:
        if attr == "OIDC_TOKEN_USE_BASIC_AUTH":
            return provider().secret_in_header
        return import_from_settings(attr, *args)

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:  # noqa: N802 (the library's name)
        return provider().token_endpoint

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:  # noqa: N802
        return provider().userinfo_endpoint

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:  # noqa: N802
        return provider().jwks_uri

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        # Only the callback view passes a nonce; a password login never reaches the provider.
        if not enabled() or request is None or "nonce" not in kwargs or "username" in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        if not token:
            raise SignInRefused("The identity provider sent no ID token.")
        found = provider()
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            raise SignInRefused("The identity provider's ID token cannot be read.") from None
        if algorithm not in found.signing_algorithms:
            raise SignInRefused(f"The ID token is signed with {algorithm!s:.20}, which is not accepted here.")
        try:
            key = self.retrieve_matching_jwk(token)
        except (SuspiciousOperation, KeyError):
            raise SignInRefused("The ID token is signed with a key the identity provider does not publish.") from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=found.issuer,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise SignInRefused("The identity provider's ID token has expired. Sign in again.") from None
        except jwt.InvalidSignatureError:
            raise SignInRefused("The ID token's signature does not verify with the identity provider's keys.") from None
        except jwt.InvalidAudienceError:
            raise SignInRefused("The ID token was issued for another application (its audience is not this client).") from None
        except jwt.InvalidIssuerError:
            raise SignInRefused("The ID token was issued by another identity provider (wrong issuer).") from None
        except jwt.PyJWTError as exc:
            raise SignInRefused(f"The identity provider's ID token is not valid: {exc}.") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SignInRefused("The ID token names several audiences but was not issued to this client (azp).")
        nonce = kwargs.get("nonce")
        if not nonce or claims.get("nonce") != nonce:
            raise SignInRefused("The ID token does not answer this sign-in (its nonce differs): it may be replayed.")
        return claims

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims, completed by the userinfo endpoint's when the provider has one."""
        info: dict[str, Any] = {}
        if provider().userinfo_endpoint and access_token:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload["sub"]:
                raise SignInRefused("The identity provider's userinfo answer is about another account (sub differs).")
        return {**info, **payload}

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not (claims.get("preferred_username") or claims.get("email")):
            raise SignInRefused("The identity provider sent neither preferred_username nor email for this account.")
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(
            oidc_identity__issuer=claims["iss"], oidc_identity__subject=claims["sub"]
        )

    def create_user(self, claims: dict[str, Any]) -> Any:
        from dashboard.accounts.models import OidcIdentity

        with transaction.atomic():
            user = self.UserModel.objects.create_user(
                _free_username(self.UserModel, _wanted_username(claims)), email=str(claims.get("email") or "")
            )
            _copy_names(user, claims)
            granted = membership(claims)
            OidcIdentity.objects.create(
                user=user, issuer=claims["iss"], subject=claims["sub"], groups=list(granted.groups),
                last_sign_in_at=timezone.now(),
            )
            apply_membership(user, granted)
        logger.info("OpenID Connect sign-in created user %s with role %s", user.username, granted.role or "none")
        return user

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        if not user.is_active:
            raise SignInRefused("This account is disabled here. Ask an administrator.")
        with transaction.atomic():
            wanted = _wanted_username(claims)
            if wanted != user.username and not self.UserModel.objects.filter(username=wanted).exists():
                user.username = wanted
            user.email = str(claims.get("email") or user.email)
            _copy_names(user, claims)
            granted = membership(claims)
            identity = user.oidc_identity
            identity.groups = list(granted.groups)
            identity.last_sign_in_at = timezone.now()
            identity.save(update_fields=["groups", "last_sign_in_at"])
            apply_membership(user, granted)
        return user


def _wanted_username(claims: dict[str, Any]) -> str:
    return str(claims.get("preferred_username") or claims.get("email"))[:150]


def _free_username(model: Any, wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`… when a local account (or another identity) already has it."""
    candidate, n = wanted, 1
    while model.objects.filter(username=candidate).exists():
        n += 1
        candidate = f"{wanted[:140]}-{n}"
    return candidate


def _copy_names(user: Any, claims: dict[str, Any]) -> None:
    user.first_name = str(claims.get("given_name") or user.first_name)[:150]
    user.last_name = str(claims.get("family_name") or user.last_name)[:150]
    user.save()
