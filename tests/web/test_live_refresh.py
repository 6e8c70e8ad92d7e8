"""Live refresh on the dashboard pages: the one header (dashboard.live) gets the page's partial only."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.live import LIVE_HEADER
from dashboard.sources.models import Source
from tests.web.conftest import record, store

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "marker"),
    [("/", 'class="cards'), ("/deliveries/?status=delivered", 'id="deliveries-table"')],
)
def test_it_answers_the_partial_and_says_so(
    plain_source: Source, logged_in_client: Client, url: str, marker: str
) -> None:
    store(plain_source, record())
    response = logged_in_client.get(url, headers={LIVE_HEADER: "1"})
    body = response.content.decode()
    assert response.status_code == 200
    assert marker in body
    assert "<html" not in body and "topbar" not in body and "data-live" not in body
    assert response[LIVE_HEADER] == "1"
    assert LIVE_HEADER in response["Vary"] and "Cookie" in response["Vary"]
    assert "no-store" in response["Cache-Control"]


@pytest.mark.parametrize("url", ["/", "/deliveries/"])
def test_without_the_header_it_answers_the_page_with_the_script(
    plain_source: Source, logged_in_client: Client, url: str
) -> None:
    store(plain_source, record())
    response = logged_in_client.get(url)
    body = response.content.decode()
    assert "<html" in body and "data-live" in body
    assert "dashboard/live.js" in body
    assert LIVE_HEADER not in response
    assert LIVE_HEADER in response["Vary"]


def test_an_answer_that_is_not_the_partial_does_not_echo_the_header(client: Client) -> None:
    # A session that has ended: the refresh is sent to the login page, which the script must not swap in.
    response = client.get("/", headers={LIVE_HEADER: "1"})
    assert response.status_code == 302
    assert LIVE_HEADER not in response
