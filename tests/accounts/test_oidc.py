"""Sign-in with an identity provider, against a real OpenID Connect provider on loopback
(tests/oidc_provider.py): the library's calls go over HTTP to it, nothing is mocked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from dashboard.accounts import oidc
from dashboard.accounts.models import OidcIdentity
from dashboard.accounts.roles import STAFF, VIEWERS, assign_role
from tests.conftest import make_user
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider

PASSWORD = "correct-horse-battery"  # make_user's


@pytest.fixture
def provider(settings: Any, db: None) -> Iterator[Provider]:
    running = Provider().start()
    settings.OIDC_DISCOVERY_URL = running.discovery_url
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_ROLE_MAP = {"ops-admins": STAFF, "ops": VIEWERS}
    oidc.forget_discovery()
    yield running
    running.stop()
    oidc.forget_discovery()


def start(client: Client, next_url: str = "") -> str:
    """The login's first leg: the dashboard redirects to the provider, which approves and redirects back.
    Returns the callback URL the browser would follow."""
    answer = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert answer.status_code == 302, answer.content
    back = httpx.get(answer["Location"], follow_redirects=False)
    assert back.status_code == 302, back.text
    return back.headers["location"]


def sign_in(client: Client, next_url: str = "") -> Any:
    return client.get(start(client, next_url))


def signed_in_user(client: Client) -> User | None:
    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None


def roles_of(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def assert_refused(answer: Any, client: Client, words: str, status: int = 403) -> None:
    assert answer.status_code == status
    assert b"Sign-in refused" in answer.content
    assert words.encode() in answer.content, answer.content.decode()[:2000]
    assert signed_in_user(client) is None


def test_the_login_page_offers_the_provider(provider: Provider) -> None:
    page = Client().get("/accounts/login/?next=/streams/")
    assert b"Sign in with Example SSO" in page.content
    assert b'href="/oidc/authenticate/?next=/streams/"' in page.content
    # The password form stays while LOCAL_LOGIN is on.
    assert b'name="password"' in page.content


def test_the_authorization_request_carries_state_nonce_and_a_pkce_challenge(provider: Provider) -> None:
    client = Client()
    location = client.get("/oidc/authenticate/")["Location"]
    assert location.startswith(f"{provider.url}/authorize?")
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert query["client_id"] == CLIENT_ID and query["response_type"] == "code"
    assert query["scope"] == "openid email profile groups"
    assert query["redirect_uri"] == "http://testserver/oidc/callback/"
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    kept = client.session["oidc_states"][query["state"]]
    assert kept["nonce"] == query["nonce"] and kept["code_verifier"]


def test_a_first_sign_in_creates_the_user_with_the_mapped_role_and_lands_on_the_overview(provider: Provider) -> None:
    client = Client()
    answer = sign_in(client)
    assert answer.status_code == 302
    assert answer["Location"] == reverse("web:overview")
    user = signed_in_user(client)
    assert user is not None and user.username == "alice" and user.email == "alice@example.com"
    assert (user.first_name, user.last_name) == ("Alice", "Ops")
    assert roles_of(user) == {VIEWERS} and not user.is_staff
    identity = OidcIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject, identity.groups) == (provider.url, "00u-alice-1", ["ops"])
    assert client.get(reverse("web:overview")).status_code == 200
    # The password is unusable: the account signs in only through the provider.
    assert not user.has_usable_password()


def test_the_next_page_is_kept_through_the_sign_in(provider: Provider) -> None:
    client = Client()
    assert sign_in(client, "/streams/")["Location"] == "/streams/"
    # Another site is never a destination.
    assert sign_in(Client(), "https://evil.example/")["Location"] == reverse("web:overview")


def test_every_sign_in_re_reads_the_role_from_the_groups(provider: Provider) -> None:
    client = Client()
    sign_in(client)
    provider.account.groups = ["ops", "ops-admins"]
    client = Client()
    sign_in(client)
    user = User.objects.get(username="alice")
    assert roles_of(user) == {STAFF} and user.is_staff
    assert client.get("/admin/").status_code == 200

    # No mapped group left: no role, and the pages say "No access".
    provider.account.groups = ["marketing"]
    client = Client()
    assert sign_in(client).status_code == 302
    user = User.objects.get(username="alice")
    assert roles_of(user) == set() and not user.is_staff
    overview = client.get(reverse("web:overview"))
    assert overview.status_code == 403 and b"No access" in overview.content
    assert User.objects.count() == 1


def test_a_nested_groups_claim_is_read(provider: Provider, settings: Any) -> None:
    settings.OIDC_GROUPS_CLAIM = "realm_access.roles"
    provider.account.groups = []
    provider.token_overrides = {"realm_access": {"roles": ["ops-admins"]}}
    client = Client()
    sign_in(client)
    assert roles_of(User.objects.get(username="alice")) == {STAFF}


def test_a_renamed_account_stays_one_user_and_never_takes_a_local_account(provider: Provider) -> None:
    local = make_user("alice")
    client = Client()
    sign_in(client)
    created = signed_in_user(client)
    assert created is not None and created.username == "alice-2" and created.pk != local.pk

    provider.account.preferred_username = "alice.ops"
    provider.account.email = "alice.ops@example.com"
    client = Client()
    sign_in(client)
    renamed = signed_in_user(client)
    assert renamed is not None and renamed.pk == created.pk
    assert (renamed.username, renamed.email) == ("alice.ops", "alice.ops@example.com")
    assert User.objects.count() == 2
    local.refresh_from_db()
    assert local.check_password(PASSWORD) and not OidcIdentity.objects.filter(user=local).exists()


def test_a_tampered_state_is_refused(provider: Provider) -> None:
    client = Client()
    callback = start(client)
    parts = urlsplit(callback)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    answer = client.get(parts.path, {"code": query["code"], "state": query["state"] + "x"})
    assert_refused(answer, client, "its state is unknown", 400)
    assert User.objects.count() == 0


def test_a_callback_used_twice_is_refused(provider: Provider) -> None:
    client = Client()
    callback = start(client)
    assert client.get(callback).status_code == 302
    client.post("/accounts/logout/")
    assert_refused(client.get(callback), client, "already used", 400)
    # Nor from another browser, which never started it.
    other = Client()
    assert_refused(other.get(callback), other, "already used", 400)


def test_a_replayed_id_token_is_refused_for_its_nonce(provider: Provider) -> None:
    sign_in(Client())
    provider.replay = provider.issued[-1]  # the provider (or someone between) sends the earlier token again
    client = Client()
    assert_refused(sign_in(client), client, "nonce differs")


def test_an_expired_id_token_is_refused(provider: Provider) -> None:
    now = int(time.time())
    provider.token_overrides = {"iat": now - 7200, "exp": now - 3600}
    client = Client()
    assert_refused(sign_in(client), client, "has expired")


def test_an_id_token_signed_with_another_key_is_refused(provider: Provider) -> None:
    provider.sign_with = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    client = Client()
    assert_refused(sign_in(client), client, "signature does not verify")


def test_an_id_token_with_an_unknown_key_id_is_refused(provider: Provider) -> None:
    provider.sign_with = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    provider.kid = "key-2"
    published = provider.jwks()["keys"][0]
    # The JWKS publishes only key-1 (the right key); the token names key-2.
    provider.jwks = lambda: {"keys": [dict(published, kid="key-1")]}  # type: ignore[method-assign]
    client = Client()
    assert_refused(sign_in(client), client, "key the identity provider does not publish")


def test_an_id_token_for_another_audience_is_refused(provider: Provider) -> None:
    provider.token_overrides = {"aud": "another-application"}
    client = Client()
    assert_refused(sign_in(client), client, "issued for another application")


def test_an_id_token_from_another_issuer_is_refused(provider: Provider) -> None:
    provider.token_overrides = {"iss": "https://evil.example"}
    client = Client()
    assert_refused(sign_in(client), client, "wrong issuer")


def test_a_disabled_user_is_refused(provider: Provider) -> None:
    sign_in(Client())
    User.objects.filter(username="alice").update(is_active=False)
    client = Client()
    assert_refused(sign_in(client), client, "disabled")


def test_a_provider_that_cannot_be_reached_gives_a_readable_page(provider: Provider, settings: Any) -> None:
    settings.OIDC_DISCOVERY_URL = "http://127.0.0.1:9/.well-known/openid-configuration"
    oidc.forget_discovery()
    answer = Client().get("/oidc/authenticate/")
    assert answer.status_code == 502
    assert b"discovery document" in answer.content


def test_the_provider_refusing_is_a_readable_page(provider: Provider) -> None:
    client = Client()
    client.get("/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    answer = client.get("/oidc/callback/", {"error": "access_denied", "error_description": "Not assigned",
                                            "state": state})
    assert_refused(answer, client, "Not assigned")


def test_signing_out_ends_the_session_and_the_providers(provider: Provider) -> None:
    client = Client()
    sign_in(client)
    id_token = provider.issued[-1]
    answer = client.post("/accounts/logout/")
    assert answer.status_code == 302
    assert signed_in_user(client) is None
    assert client.get(reverse("web:overview")).status_code == 302
    location = answer["Location"]
    assert location.startswith(f"{provider.url}/logout?")
    back = httpx.get(location, follow_redirects=False)
    assert back.headers["location"] == "http://testserver/accounts/login/?logged_out=1"
    assert provider.logouts[-1]["id_token_hint"] == [id_token]
    assert provider.logouts[-1]["client_id"] == [CLIENT_ID]


def test_a_password_login_signs_out_locally_only(provider: Provider) -> None:
    make_user("bob")
    client = Client()
    assert client.post("/accounts/login/", {"username": "bob", "password": PASSWORD}).status_code == 302
    answer = client.post("/accounts/logout/")
    assert answer["Location"] == "/accounts/login/?logged_out=1"
    assert provider.logouts == []


def test_without_a_provider_the_sign_in_urls_answer_404(settings: Any, db: None) -> None:
    settings.OIDC_DISCOVERY_URL = ""
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/?code=x&state=y").status_code == 404
    assert b"Sign in with" not in Client().get("/accounts/login/").content


# --- LOCAL_LOGIN off ---------------------------------------------------------------------------------


@pytest.fixture
def provider_only(provider: Provider, settings: Any) -> Provider:
    settings.LOCAL_LOGIN = False
    settings.BREAK_GLASS_USERS = ["breakglass"]
    return provider


def test_with_local_login_off_the_password_form_is_gone(provider_only: Provider) -> None:
    page = Client().get("/accounts/login/")
    assert b"Sign in with Example SSO" in page.content
    assert b'name="password"' not in page.content
    # The break-glass way in: the form on ?local=1.
    assert b'name="password"' in Client().get("/accounts/login/?local=1").content


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_with_local_login_off_passwords_are_refused_but_the_break_glass_accounts(
    provider_only: Provider, url: str
) -> None:
    make_user("carol", staff=True)
    make_user("breakglass", staff=True)
    client = Client()
    refused = client.post(url, {"username": "carol", "password": PASSWORD})
    assert refused.status_code == 200 and signed_in_user(client) is None
    accepted = client.post(url, {"username": "breakglass", "password": PASSWORD})
    assert accepted.status_code == 302
    assert signed_in_user(client) == User.objects.get(username="breakglass")


def test_with_local_login_off_the_break_glass_account_is_still_throttled(provider_only: Provider) -> None:
    make_user("breakglass", staff=True)
    for n in range(10):
        Client().post("/accounts/login/", {"username": "breakglass", "password": f"guess-{n}"},
                      REMOTE_ADDR=f"203.0.113.{n + 1}")
    locked = Client().post("/accounts/login/", {"username": "breakglass", "password": PASSWORD},
                           REMOTE_ADDR="192.0.2.9")
    assert locked.status_code == 429


def test_with_local_login_off_refused_passwords_count_as_failures(provider_only: Provider) -> None:
    make_user("carol")
    for _attempt in range(10):
        Client().post("/accounts/login/", {"username": "carol", "password": PASSWORD}, REMOTE_ADDR="198.51.100.3")
    # The address that kept trying is locked out, even for the break-glass account.
    make_user("breakglass", staff=True)
    locked = Client().post("/accounts/login/", {"username": "breakglass", "password": PASSWORD},
                           REMOTE_ADDR="198.51.100.3")
    assert locked.status_code == 429


def test_the_admin_lists_the_identities(provider: Provider) -> None:
    sign_in(Client())
    root = make_user("root", staff=True)
    client = Client()
    client.force_login(root)
    page = client.get("/admin/accounts/oidcidentity/")
    assert page.status_code == 200 and b"00u-alice-1" in page.content


def test_without_a_role_map_roles_are_given_by_hand_and_kept(provider: Provider, settings: Any) -> None:
    settings.OIDC_ROLE_MAP = {}
    client = Client()
    sign_in(client)
    user = User.objects.get(username="alice")
    assert roles_of(user) == set()
    assert client.get(reverse("web:overview")).status_code == 403
    assign_role(user, VIEWERS)
    client = Client()
    sign_in(client)
    assert roles_of(User.objects.get(username="alice")) == {VIEWERS}
    assert client.get(reverse("web:overview")).status_code == 200


def test_with_local_login_off_a_refused_password_says_why(provider_only: Provider) -> None:
    make_user("carol")
    page = Client().post("/accounts/login/?local=1", {"username": "carol", "password": PASSWORD})
    assert b"may not log in with a password" in page.content
    assert b"sign in with Example SSO" in page.content


def test_a_provider_taking_the_secret_only_in_a_basic_header_gets_it_there(provider: Provider) -> None:
    provider.token_auth_methods = ["client_secret_basic"]
    client = Client()
    assert sign_in(client).status_code == 302
    assert signed_in_user(client) is not None


def test_a_wrong_client_secret_is_a_readable_page(provider: Provider, settings: Any) -> None:
    settings.OIDC_RP_CLIENT_SECRET = "not-the-secret"
    client = Client()
    answer = sign_in(client)
    assert_refused(answer, client, "The identity provider refused the sign-in", 502)
    assert b"not-the-secret" not in answer.content
