"""Live refresh on the lookup pages: the same header as the dashboard's gets the results partial only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.live import LIVE_HEADER
from tests.lookups.conftest import APTOS_CREATOR, BAYC


@pytest.mark.parametrize(
    ("url", "query", "marker"),
    [
        ("/lookups/owners/", {"address": BAYC}, 'class="data owners-table"'),
        ("/lookups/creators/", {"addresses": APTOS_CREATOR}, 'class="card collection-group"'),
    ],
)
def test_it_answers_the_results_partial_and_says_so(
    viewer_client: Client, source: Any, url: str, query: dict[str, str], marker: str
) -> None:
    response = viewer_client.get(url, query, headers={LIVE_HEADER: "1"})
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="lookup-results" class="lookup-results js-lookup-results"')
    assert body.rstrip().endswith("</section>")
    assert marker in body and 'rel="next"' in body
    assert "<html" not in body and "lookup-form" not in body
    assert response[LIVE_HEADER] == "1"
    assert LIVE_HEADER in response["Vary"]
    assert response["Cache-Control"] == "private, no-store"

    page = viewer_client.get(url, query)
    html = page.content.decode()
    assert "<html" in html and "lookup-form" in html and marker in html
    assert "dashboard/live.js" in html and "lookups/lookups.js" in html
    assert LIVE_HEADER not in page
    assert LIVE_HEADER in page["Vary"]


@pytest.mark.parametrize(
    ("url", "query"),
    [("/lookups/owners/", {}), ("/lookups/owners/", {"address": "0xnothex"}), ("/lookups/creators/", {})],
)
def test_an_empty_or_invalid_form_answers_the_page_without_the_echo(
    viewer_client: Client, source: Any, url: str, query: dict[str, str]
) -> None:
    # Nothing to refresh: the script sees no echoed header and leaves the page alone.
    response = viewer_client.get(url, query, headers={LIVE_HEADER: "1"})
    assert "<html" in response.content.decode()
    assert LIVE_HEADER not in response
