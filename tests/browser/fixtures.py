"""Headless Chromium (Debian's package) driven by Playwright against pytest-django's live server.

Loaded once for the whole suite from tests/conftest.py (``pytest_plugins``): a second copy of the
session-scoped ``browser`` fixture would start a second Playwright inside the first one's event loop.

Screenshots go to test-artifacts/screenshots/. Where no Chromium is installed the tests skip and say
how to get one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

# Playwright's sync API runs an event loop in this thread; the ORM calls made by tests are still
# synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ROOT = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    candidate = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    return candidate if Path(candidate).exists() else None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "browser tests need Chromium: install Debian's package (sudo apt-get install chromium) "
            "or point CHROMIUM_PATH at a Chromium binary"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def context_for(browser: Any, live_server: Any, user: User | None, **options: Any) -> Any:
    """A browser context logged in as `user` (anonymous when None); `options` go to new_context
    (timezone_id, locale...)."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900}, **options)
    if user is not None:
        client = Client()
        client.force_login(user)
        context.add_cookies(
            [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
        )
    return context


@pytest.fixture
def anonymous_page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = context_for(browser, live_server, None)
    yield context.new_page()
    context.close()


@pytest.fixture
def staff_user(transactional_db: None) -> User:
    from tests.conftest import make_user

    return make_user("operator", staff=True)


@pytest.fixture
def page(browser: Any, live_server: Any, staff_user: User) -> Iterator[Any]:
    """A page logged in as a staff user."""
    context = context_for(browser, live_server, staff_user)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def viewer_page(browser: Any, live_server: Any, transactional_db: None) -> Iterator[Any]:
    """A page logged in as a user without staff rights."""
    from tests.conftest import make_user

    context = context_for(browser, live_server, make_user("viewer"))
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_until(page: Any, expression: str, timeout: float = 10.0) -> None:
    """Wait for a JavaScript expression to be truthy. Unlike page.wait_for_function, whose polling evaluates
    the predicate with eval inside the page, this works under the dashboard's Content-Security-Policy."""
    import time

    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        page.wait_for_timeout(100)
