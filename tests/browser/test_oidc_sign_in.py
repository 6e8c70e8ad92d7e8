"""Signing in through the identity provider's button and out again in Chromium, against the loopback
provider of tests/oidc_provider.py."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from dashboard.accounts import oidc
from dashboard.accounts.roles import VIEWERS
from tests.browser.fixtures import screenshot
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider

pytestmark = pytest.mark.browser


@pytest.fixture
def provider(settings: Any, transactional_db: None) -> Iterator[Provider]:
    running = Provider().start()
    settings.OIDC_DISCOVERY_URL = running.discovery_url
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_ROLE_MAP = {"ops": VIEWERS}
    settings.LOCAL_LOGIN = False
    # What settings.py adds for a configured provider: logging out may redirect to it.
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"].append(running.url)
    settings.CONTENT_SECURITY_POLICY = policy
    oidc.forget_discovery()
    yield running
    running.stop()
    oidc.forget_discovery()


def test_it_signs_in_with_the_providers_button_and_out_again(anonymous_page: Any, provider: Provider) -> None:
    page = anonymous_page
    page.set_default_timeout(10_000)
    page.goto("/deliveries/")
    assert "/accounts/login/" in page.url
    # Password logins are off: only the provider's button.
    assert page.locator("#id_password").count() == 0
    screenshot(page, "login-oidc")
    page.click("text=Sign in with Example SSO")

    page.wait_for_url("**/deliveries/")
    assert page.locator("h1").first.inner_text() == "Deliveries"
    user = User.objects.get(username="alice")
    assert set(user.groups.values_list("name", flat=True)) == {VIEWERS}

    page.locator("form[action$='/logout/'] button").first.click()
    page.wait_for_url("**/accounts/login/?logged_out=1")
    assert "You have logged out." in page.inner_text(".login-card")
    assert provider.logouts and provider.logouts[-1]["client_id"] == [CLIENT_ID]
    page.goto("/deliveries/")
    assert "/accounts/login/" in page.url
