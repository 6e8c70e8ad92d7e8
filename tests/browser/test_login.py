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
