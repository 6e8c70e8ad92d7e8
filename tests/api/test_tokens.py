"""Tokens: shown once, stored as a digest, refused when unknown, expired or revoked; last use recorded; the
page to make, list and revoke one's own; the admin's for a service account."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.api.models import ApiToken
from dashboard.api.tokens import TokenRefused, create_token, token_of
from tests.api.conftest import bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def _table_text() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(t)::text FROM api_apitoken t")
        return " ".join(row[0] for row in cursor.fetchall())


def test_it_stores_only_the_digest_and_a_short_prefix() -> None:
    user = make_user()
    token, secret = create_token(user, "deploy-bot", ["read"], timezone.now() + timedelta(days=30))
    assert re.fullmatch(r"sdt_[A-Za-z0-9_-]{43}", secret)
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert token.prefix == secret[:12]
    stored = _table_text()
    assert secret not in stored and secret[12:] not in stored and secret[12:24] not in stored


def test_it_refuses_unknown_expired_and_revoked_tokens() -> None:
    user = make_user()
    token, secret = create_token(user, "t", ["read"], timezone.now() + timedelta(days=1))
    assert token_of(secret).pk == token.pk
    for wrong in ("sdt_" + "x" * 43, secret[:-1] + ("A" if secret[-1] != "A" else "B"), "not-a-token"):
        with pytest.raises(TokenRefused):
            token_of(wrong)
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(TokenRefused, match="expired"):
        token_of(secret)
    ApiToken.objects.update(expires_at=timezone.now() + timedelta(days=1), revoked_at=timezone.now())
    with pytest.raises(TokenRefused, match="revoked"):
        token_of(secret)


def test_a_token_lasts_at_most_the_maximum(settings: object) -> None:
    with pytest.raises(ValueError, match="365"):
        create_token(make_user(), "t", ["read"], timezone.now() + timedelta(days=366))


def test_it_records_the_last_use_and_address(settings: object) -> None:
    secret = token_for(make_user(), ["read"])
    response = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", REMOTE_ADDR="203.0.113.9").get("/api/v1/incidents")
    assert response.status_code == 200
    token = ApiToken.objects.get()
    assert token.last_used_from == "203.0.113.9"
    assert token.last_used_at is not None and timezone.now() - token.last_used_at < timedelta(seconds=10)


def test_the_page_shows_the_secret_once_and_lists_the_token() -> None:
    client = Client()
    client.force_login(make_user())
    response = client.post("/account/tokens/", {"name": "ci", "scopes": ["read"], "expires_in_days": "30"})
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    secret = re.search(r'id="token-secret">(sdt_[^<]+)<', response.content.decode()).group(1)  # type: ignore[union-attr]
    assert bearer(secret).get("/api/v1/incidents").status_code == 200
    again = client.get("/account/tokens/").content.decode()
    assert secret not in again
    assert ApiToken.objects.get().prefix in again and "ci" in again


def test_the_page_refuses_a_bad_form() -> None:
    client = Client()
    client.force_login(make_user())
    response = client.post("/account/tokens/", {"name": "", "scopes": ["everything"], "expires_in_days": "9999"})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_revoking_asks_first_then_revokes_only_ones_own() -> None:
    alice, bob = make_user("alice"), make_user("bob")
    secret = token_for(alice, ["read"])
    token = ApiToken.objects.get()
    client = Client()
    client.force_login(alice)
    page = client.get(f"/account/tokens/{token.pk}/revoke/")
    assert page.status_code == 200 and b"Revoke" in page.content
    assert ApiToken.objects.get().revoked_at is None
    other = Client()
    other.force_login(bob)
    assert other.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert ApiToken.objects.get().revoked_at is not None
    assert bearer(secret).get("/api/v1/incidents").status_code == 401


def test_the_revoke_form_needs_csrf() -> None:
    alice = make_user("alice")
    token_for(alice, ["read"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(f"/account/tokens/{ApiToken.objects.get().pk}/revoke/").status_code == 403


def test_anonymous_users_go_to_the_login() -> None:
    response = Client().get("/account/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_staff_make_a_token_for_a_service_account_in_the_admin() -> None:
    service = make_user("svc-deploy")
    client = Client()
    client.force_login(make_user("root", staff=True))
    response = client.post(
        "/admin/api/apitoken/add/",
        {"name": "deploy", "user": service.pk, "scopes": ["read", "act"], "expires_in_days": "90"},
    )
    assert response.status_code == 200, response.content[:2000]
    secret = re.search(r'id="token-secret">(sdt_[^<]+)<', response.content.decode()).group(1)  # type: ignore[union-attr]
    token = ApiToken.objects.get()
    assert token.user == service and token.created_by == "root" and token.scopes == ["act", "read"]
    assert secret not in _table_text()
    assert bearer(secret).get("/api/v1/incidents").status_code == 200
    assert secret not in client.get(f"/admin/api/apitoken/{token.pk}/change/").content.decode()


def _admin_add(client: Client, user: Any) -> Any:
    return client.post(
        "/admin/api/apitoken/add/", {"name": "svc", "user": user.pk, "scopes": ["read"], "expires_in_days": "30"}
    )


def test_staff_make_tokens_only_for_accounts_holding_no_more_than_they_do() -> None:
    staff = make_user("sam", role="Staff")
    client = Client()
    client.force_login(staff)
    service = make_user("svc-reader")
    response = _admin_add(client, service)
    assert response.status_code == 200 and b"token-secret" in response.content
    assert ApiToken.objects.get().user == service
    root = make_user("root", staff=True)
    refused = _admin_add(client, root)
    assert refused.status_code == 200 and b"only a superuser may make a token" in refused.content
    assert ApiToken.objects.count() == 1
    # A superuser may make one for anybody.
    boss = Client()
    boss.force_login(root)
    assert b"token-secret" in _admin_add(boss, staff).content
