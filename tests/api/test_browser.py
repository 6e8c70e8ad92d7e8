"""The tokens page and the API's docs in Chromium under the Content-Security-Policy: a token made, shown once,
used by the docs page's Swagger UI, revoked after the confirmation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dashboard.api.models import ApiToken
from tests.browser.test_csp import Violations

pytestmark = pytest.mark.browser


def test_make_use_and_revoke_a_token_in_the_browser(page: Any, live_server: Any) -> None:
    violations = Violations(page)
    page.goto("/account/tokens/")
    page.fill("#id_name", "ci-bot")
    page.check("input[name=scopes][value=read]")
    page.click("#token-form button[type=submit]")
    secret = page.text_content("#token-secret").strip()
    assert secret.startswith("sdt_")
    answer = httpx.get(f"{live_server.url}/api/v1/incidents", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200
    page.goto("/account/tokens/")
    assert secret not in page.content()

    page.goto("/api/v1/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
    assert page.locator(".swagger-ui .opblock").count() >= 10

    page.goto("/account/tokens/")
    page.click("#tokens a:has-text('Revoke')")
    page.click("#revoke-form button[type=submit]")
    page.wait_for_url("**/account/tokens/")
    assert ApiToken.objects.get().revoked_at is not None
    assert httpx.get(f"{live_server.url}/api/v1/incidents",
                     headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    assert violations.all() == []
