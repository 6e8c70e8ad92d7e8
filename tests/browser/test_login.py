from __future__ import annotations

from typing import Any

import pytest

from tests.browser.fixtures import screenshot
from tests.conftest import make_user

pytestmark = pytest.mark.browser


def test_it_logs_in_through_the_form(anonymous_page: Any, transactional_db: None) -> None:
    make_user("dora")
    page = anonymous_page

    page.goto("/deliveries/")
    assert "/accounts/login/" in page.url
    screenshot(page, "login")
    page.fill("#id_username", "dora")
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")

    page.wait_for_url("**/deliveries/")
    assert page.locator("h1").first.inner_text() == "Deliveries"


def test_a_wrong_password_is_refused(anonymous_page: Any, transactional_db: None) -> None:
    make_user("dora")
    page = anonymous_page
    page.goto("/accounts/login/")
    page.fill("#id_username", "dora")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    assert "didn't match" in page.locator(".error").inner_text()
    # The name stays, so only the password needs typing again.
    assert page.input_value("#id_username") == "dora"
    assert page.evaluate("document.activeElement.id") == "id_password"


def test_logging_out_says_so(page: Any) -> None:
    page.goto("/")
    page.locator("form[action$='/logout/'] button, a[href$='/logout/']").first.click()
    page.wait_for_url("**/accounts/login/**")
    assert "You have logged out." in page.inner_text(".login-card")
    # The site icon is served to pages that name none, without a login.
    assert page.request.get("/favicon.ico").headers["content-type"].startswith("image/svg+xml")
