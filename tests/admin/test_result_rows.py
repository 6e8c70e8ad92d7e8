"""The deliveries change list builds its rows itself (`DeliveryChangeList.result_rows`): the same cells, byte for
byte, as Django's generic `items_for_result`, for every kind of value a column can hold."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.templatetags.admin_list import items_for_result
from django.test import Client

from dashboard.deliveries.models import Delivery
from tests import factories
from tests.admin.conftest import NOW

URL = "/admin/deliveries/delivery/"
HOSTILE = '<script>alert("x")</script> & "quotes"'


def _store_varied(source: Any) -> None:
    records = [
        factories.history_record(date=NOW, tag=HOSTILE, error=HOSTILE + " " + "x" * 120, retries=3, block=1),
        factories.history_record(date=NOW, tag="", chain="", confirmed=False, block=0, error="Request failed"),
        factories.history_record(date=NOW, tag="tag\u202ewith override", error="   ", retries=0),
        factories.history_record(date=NOW, tag="orders", error="timeout <b>", retries=12, block=19_000_000),
    ]
    factories.store(source, *records)
    blank = Delivery.objects.get(pk=records[2]["id"])
    Delivery.objects.filter(pk=blank.pk).update(confirmed=None, block_number=None, tag="   ")


def _pages(client: Client, query: dict[str, str]) -> tuple[Any, str]:
    response = client.get(URL, query)
    assert response.status_code == 200
    return response.context["cl"], response.content.decode()


def test_the_rows_are_djangos_rows(staff_client: Client, plain_source: Any) -> None:
    _store_varied(plain_source)
    for query in ({}, {"status__exact": "retrying"}, {"q": "Request failed"}, {"since": "30d", "o": "1"}):
        cl, body = _pages(staff_client, query)
        rows = cl.result_rows()
        assert rows, query
        assert rows == ["".join(items_for_result(cl, result, None)) for result in cl.result_list], query
        for row in rows:
            assert f"<tr>{row}</tr>" in body, query
    assert "<script>" not in body


def test_every_row_is_on_the_page_escaped_and_linked_with_the_filters(
    staff_client: Client, plain_source: Any
) -> None:
    _store_varied(plain_source)
    retrying = Delivery.objects.filter(status="retrying")
    cl, body = _pages(staff_client, {"status__exact": "retrying"})
    assert body.count('<td class="field-status">Retrying</td>') == len(cl.result_list) == retrying.count() > 1
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quotes&quot;" in body
    for delivery in retrying:
        assert f'href="{URL}{delivery.pk}/change/?_changelist_filters=status__exact%3Dretrying"' in body
    _cl, body = _pages(staff_client, {})
    assert body.count('<td class="field-confirmed"><img src="/static/admin/img/icon-unknown.svg" alt="None">') == 1
    assert body.count('<td class="field-block_number">-</td>') == 1
    assert body.count('<td class="field-tag">-</td>') == 2


def test_a_popup_gets_djangos_rows_with_their_popup_links(staff_client: Client, plain_source: Any) -> None:
    _store_varied(plain_source)
    response = staff_client.get(URL, {"_popup": "1"})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.count("data-popup-opener=") == Delivery.objects.count() == 4
