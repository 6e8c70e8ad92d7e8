"""The admin links deliveries to their dashboard pages and names chains from the one chain table."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from tests import factories
from tests.admin.conftest import NOW, STREAM, history_record

URL = "/admin/deliveries/delivery/"


def test_a_delivery_links_to_its_own_dashboard_page(staff_client: Client, plain_source: Any) -> None:
    record = history_record(error="socket hang up", retries=1)
    store_records(plain_source, [record], now=NOW)
    delivery = Delivery.objects.get(pk=record["id"])

    body = staff_client.get(f"{URL}{delivery.pk}/change/").content.decode()
    assert f'<a href="{delivery.get_absolute_url()}">open in the dashboard</a>' in body
    assert staff_client.get(delivery.get_absolute_url()).status_code == 200
    listing = staff_client.get(URL).content.decode()
    assert f'href="{delivery.get_absolute_url()}"' in listing


@pytest.mark.parametrize(
    ("chain_id", "label"),
    [("0x61", "BNB Testnet (0x61)"), ("0x89", "Polygon (0x89)"), ("0x9999", "0x9999")],
)
def test_the_chain_filter_names_chains_as_the_pages_do(
    staff_client: Client, plain_source: Any, chain_id: str, label: str
) -> None:
    record = factories.history_record(stream_id=STREAM, chain=chain_id, date=NOW)
    store_records(plain_source, [record], now=NOW)

    body = staff_client.get(URL).content.decode()
    assert f"?chain={chain_id}" in body and label in body
