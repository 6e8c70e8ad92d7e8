from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/streams/",
    "/timeline/",
    "/deliveries/",
    "/deliveries/export.csv",
    "/deliveries/00000000-0000-4000-8000-000000000000/",
    "/deliveries/00000000-0000-4000-8000-000000000000/payload.json",
    "/errors/",
    "/retries/",
    "/search/?q=1",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_needs_a_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("path", PAGES)
def test_a_login_without_the_viewer_role_sees_no_data(client: Client, path: str) -> None:
    from tests.conftest import make_user

    client.force_login(make_user("nobody", role=None))
    response = client.get(path)
    assert response.status_code == 403


@pytest.mark.parametrize(
    "path",
    [
        "/?range=2y",
        "/?range=custom&start=2026-02-30",
        "/timeline/?range=custom",
        "/timeline/?range=custom&start=2026-01-02&end=2026-01-01",
        "/timeline/?range=custom&start=2020-01-01&end=2026-01-01",
        "/timeline/?stream=" + "x" * 65,
        "/deliveries/?status=exploded",
        "/deliveries/?retries=-1",
        "/deliveries/?retries=99",
        "/deliveries/?retries=lots",
        "/deliveries/?group=abc",
        "/deliveries/?group=99999999999999999999999",
        "/deliveries/?chain=ethereum-classic",
        "/deliveries/?confirmed=maybe",
        "/deliveries/?start=yesterday",
        "/deliveries/?start=99999-01-01",
        # Near datetime's limits the chart buckets would overflow.
        "/?range=custom&start=9999-12-30&end=9999-12-31T23:59:59",
        "/timeline/?range=custom&start=9999-12-30&end=9999-12-31T23:59:59",
        "/errors/?range=custom&start=9999-10-01&end=9999-12-31",
        "/retries/?range=custom&start=0001-01-01&end=0001-01-02",
        "/deliveries/?range=custom&start=0001-01-01&end=0001-01-02",
        "/deliveries/?after=garbage",
        "/deliveries/?after=99999999999999999999_" + "0" * 32,
        "/deliveries/?before=1_nothex",
        "/deliveries/?q=hello",
        "/deliveries/?order=sideways",
        "/deliveries/?tag=%00",
        "/deliveries/export.csv?status=exploded",
        "/errors/?range=forever",
        "/retries/?by=chain",
        "/retries/?range=custom&start=soon",
        "/search/?q=0x%3Cscript%3Ealert(1)%3C/script%3E",
        "/search/?q=0x123",
    ],
)
def test_a_malformed_filter_is_a_400_with_a_message(logged_in_client: Client, path: str) -> None:
    response = logged_in_client.get(path)
    assert response.status_code == 400
    body = response.content.decode()
    assert "These filters can't be used" in body
    assert "<script>alert(1)</script>" not in body
    assert 'class="js-errors"' in body and "<li>" in body


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/deliveries/00000000-0000-4000-8000-000000000000/", "No delivery with this id is stored."),
        ("/deliveries/not-a-uuid/", "Nothing is stored at this address."),
        ("/nowhere/", "Nothing is stored at this address."),
    ],
)
def test_an_unknown_address_is_a_404_page_of_the_dashboard(logged_in_client: Client, path: str, message: str) -> None:
    response = logged_in_client.get(path)
    assert response.status_code == 404
    body = response.content.decode()
    assert "<h1>Not found</h1>" in body and message in body
    assert 'class="mainnav"' in body


def test_a_login_without_the_role_is_told_what_to_ask_for(client: Client) -> None:
    from tests.conftest import make_user

    client.force_login(make_user("nobody", role=None))
    body = client.get("/deliveries/").content.decode()
    assert "<h1>No access</h1>" in body and "Viewers role" in body


def test_the_server_error_page_renders_without_a_request() -> None:
    from django.test import RequestFactory
    from django.views.defaults import server_error

    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()


def test_a_kilobyte_filter_value_is_echoed_clipped(logged_in_client: Client) -> None:
    response = logged_in_client.get("/deliveries/?status=" + "x" * 5000)
    assert response.status_code == 400
    body = response.content.decode()
    assert "Status: Select a valid choice." in body
    assert "x" * 250 in body and "x" * 400 not in body


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/deliveries/?range=custom", "A custom range needs its dates: a start, an end, or both (UTC)."),
        ("/deliveries/?range=custom&start=&end=", "A custom range needs its dates: a start, an end, or both (UTC)."),
        ("/deliveries/export.csv?range=custom", "A custom range needs its dates"),
        ("/timeline/?range=custom&start=&end=", "A custom range needs its dates"),
        ("/errors/?range=custom", "A custom range needs its dates"),
    ],
)
def test_a_custom_range_without_dates_is_a_400_that_asks_for_them(
    logged_in_client: Client, path: str, message: str
) -> None:
    response = logged_in_client.get(path)
    assert response.status_code == 400
    assert message in response.content.decode()
