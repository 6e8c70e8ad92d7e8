"""Password guessing is stopped on both logins, per username and per client address; password reset is off;
sessions expire."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.conftest import make_user

PASSWORD = "correct-horse-battery"  # make_user's
LOGINS = {"dashboard": "/accounts/login/", "admin": "/admin/login/"}


def _post(client: Client, url: str, username: str, password: str, address: str = "198.51.100.7") -> Any:
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.django_db
@pytest.mark.parametrize("login", LOGINS)
def test_ten_wrong_passwords_lock_the_username_out_and_the_right_one_is_then_refused(login: str) -> None:
    make_user("victim", staff=True)
    url = LOGINS[login]
    client = Client()
    # Each guess from another address: the username alone is enough to lock.
    for n in range(9):
        answer = _post(client, url, "victim", f"guess-{n}", address=f"203.0.113.{n + 1}")
        assert answer.status_code == 200  # the form again, with its error
    locked = _post(client, url, "victim", "guess-9", address="203.0.113.10")
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content

    refused = _post(Client(), url, "victim", PASSWORD, address="192.0.2.50")
    assert refused.status_code == 429
    assert b"Too many failed logins" in refused.content
    assert "_auth_user_id" not in refused.client.session


@pytest.mark.django_db
@pytest.mark.parametrize("login", LOGINS)
def test_ten_failures_from_one_address_lock_that_address_out_for_every_username(login: str) -> None:
    make_user("someone", staff=True)
    url = LOGINS[login]
    for n in range(10):
        _post(Client(), url, f"nobody-{n}", "guess", address="198.51.100.99")
    refused = _post(Client(), url, "someone", PASSWORD, address="198.51.100.99")
    assert refused.status_code == 429
    # Another address logs the same user in.
    accepted = _post(Client(), url, "someone", PASSWORD, address="198.51.100.100")
    assert accepted.status_code == 302
    assert accepted.client.session["_auth_user_id"] == str(User.objects.get(username="someone").pk)


@pytest.mark.django_db
def test_a_few_failures_then_the_right_password_logs_in_and_clears_the_count() -> None:
    make_user("forgetful")
    for n in range(9):
        _post(Client(), "/accounts/login/", "forgetful", f"guess-{n}", address=f"203.0.113.{n + 1}")
    assert _post(Client(), "/accounts/login/", "forgetful", PASSWORD).status_code == 302
    # The success cleared the username's failures: nine more do not lock it.
    for n in range(9):
        _post(Client(), "/accounts/login/", "forgetful", f"again-{n}", address=f"203.0.113.{n + 20}")
    assert _post(Client(), "/accounts/login/", "forgetful", PASSWORD).status_code == 302


@pytest.mark.django_db
def test_behind_a_proxy_the_forwarded_address_is_throttled_not_the_proxy(settings: Any) -> None:
    settings.PROXY_COUNT = 1
    make_user("someone")
    for n in range(10):
        Client().post(
            "/accounts/login/", {"username": f"nobody-{n}", "password": "x"}, REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR="203.0.113.5",
        )
    # The guesser is locked out; another client behind the same proxy is not, and a forged header is no way out.
    forged = Client().post("/accounts/login/", {"username": "someone", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
                           HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.5")
    assert forged.status_code == 429
    other = Client().post("/accounts/login/", {"username": "someone", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
                          HTTP_X_FORWARDED_FOR="198.51.100.8")
    assert other.status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/MQ/set-password/",
     "/accounts/reset/done/", "/accounts/password_change/"],
)
def test_password_reset_pages_do_not_exist(path: str) -> None:
    make_user("someone")
    assert Client().get(path).status_code == 404
    assert Client().post(path, {"email": "someone@example.com"}).status_code == 404


@pytest.mark.django_db
def test_a_session_expires_after_the_configured_age(settings: Any) -> None:
    settings.SESSION_COOKIE_AGE = 600
    make_user("someone")
    client = Client()
    assert _post(client, "/accounts/login/", "someone", PASSWORD).status_code == 302
    assert client.cookies["sessionid"]["max-age"] == 600
    assert client.session.get_expiry_age() == 600
