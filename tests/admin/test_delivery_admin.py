"""Deliveries and error groups in the admin: read-only, escaped, linked to the dashboard, and never counted
in full."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.deliveries.admin import EstimatedCountPaginator
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery, ErrorGroup
from tests.admin.conftest import NOW, TX, history_record

URL = "/admin/deliveries/delivery/"
HOSTILE = '<script>alert("x")</script>'


@pytest.fixture
def hostile(plain_source: Any) -> Delivery:
    record = history_record(
        error=f"{HOSTILE} Request failed with status code 500",
        retries=2,
        tag=HOSTILE,
        txs=[{"hash": TX, "fromAddress": "0x" + "ab" * 20, "input": HOSTILE}],
        logs=[{"transactionHash": TX, "address": "0x" + "cd" * 20, "triggers": [{"name": HOSTILE, "value": "</pre>"}]}],
    )
    store_records(plain_source, [record], now=NOW)
    return Delivery.objects.get(pk=record["id"])


def test_the_list_and_the_detail_escape_upstream_text(staff_client: Client, hostile: Delivery) -> None:
    for url in (URL, f"{URL}?q={TX}", f"{URL}{hostile.pk}/change/", "/admin/deliveries/errorgroup/"):
        body = staff_client.get(url).content.decode()
        assert HOSTILE not in body, url
        assert "&lt;script&gt;" in body, url


def test_the_detail_shows_formatted_json_and_links_to_the_dashboard(staff_client: Client, hostile: Delivery) -> None:
    body = staff_client.get(f"{URL}{hostile.pk}/change/").content.decode()
    assert '<pre class="payload-json"' in body
    # Indented JSON, with its quotes escaped.
    assert "\n  &quot;block&quot;: {\n" in body
    assert f'href="/deliveries/{hostile.pk}/"' in body
    assert f"?error_group__id__exact={hostile.error_group_id}" in body


def test_deliveries_are_read_only(staff_client: Client, hostile: Delivery) -> None:
    superuser = Client()
    from tests.conftest import make_user

    superuser.force_login(make_user("root", staff=True))
    for client in (staff_client, superuser):
        assert client.get(f"{URL}add/").status_code == 403
        assert client.get(f"{URL}{hostile.pk}/delete/").status_code == 403
        response = client.post(f"{URL}{hostile.pk}/change/", {"error_message": "", "status": "delivered"})
        assert response.status_code == 403
        body = client.get(URL).content.decode()
        assert 'name="_selected_action"' not in body
        assert "Add delivery" not in body
        page = client.get(f"{URL}{hostile.pk}/change/").content.decode()
        assert 'type="submit"' not in page.split('id="delivery_form"')[-1]
    hostile.refresh_from_db()
    assert hostile.status == "retrying"


def test_error_groups_are_read_only_and_link_to_their_deliveries(staff_client: Client, hostile: Delivery) -> None:
    group = ErrorGroup.objects.get()
    body = staff_client.get("/admin/deliveries/errorgroup/").content.decode()
    assert f"{URL}?error_group__id__exact={group.pk}" in body
    assert staff_client.get(f"/admin/deliveries/errorgroup/{group.pk}/delete/").status_code == 403
    assert staff_client.post(f"/admin/deliveries/errorgroup/{group.pk}/change/", {"template": "x"}).status_code == 403


def test_the_list_never_counts_the_whole_table(staff_client: Client, hostile: Delivery) -> None:
    for query in ({}, {"q": TX}, {"status__exact": "retrying"}, {"q": "status code"}):
        with CaptureQueriesContext(connection) as ctx:
            assert staff_client.get(URL, query).status_code == 200
        counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
        assert counts, "the list counts through the bounded paginator"
        for sql in counts:
            assert "LIMIT" in sql.upper(), sql


def test_the_paginator_estimates_beyond_its_bound(plain_source: Any) -> None:
    store_records(plain_source, [history_record(block=n, minutes_ago=n) for n in range(30)], now=NOW)
    queryset = Delivery.objects.order_by("-date", "-id")

    exact = EstimatedCountPaginator(queryset, 10)
    assert (exact.count, exact.estimated, exact.num_pages) == (30, False, 3)

    class Small(EstimatedCountPaginator):
        exact_limit = 5
        max_pages = 2

    estimated = Small(queryset, 10)
    assert estimated.count > 5 and estimated.estimated
    assert estimated.num_pages == 2 and estimated.capped
    assert len(estimated.page(2).object_list) == 10


def test_an_estimate_below_the_matching_rows_never_lists_them_all(
    plain_source: Any, staff_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count the server cancelled gives the planner's estimate, which can be a few rows for an expensive
    search that matches thousands: the list still shows one page of them, not every match."""
    from dashboard.deliveries import admin as delivery_admin
    from dashboard.deliveries.counting import RowCount

    store_records(plain_source, [history_record(block=n, minutes_ago=n) for n in range(80)], now=NOW)
    monkeypatch.setattr(delivery_admin, "bounded_count", lambda queryset, limit=None: RowCount(3, estimated=True))
    response = staff_client.get("/admin/deliveries/delivery/")
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 50
    assert "about 3 deliveries (estimated)" in response.content.decode()
    response = staff_client.get("/admin/deliveries/delivery/", {"all": ""})
    assert len(response.context["cl"].result_list) == 80  # "show all" shows at most list_max_show_all (200)
