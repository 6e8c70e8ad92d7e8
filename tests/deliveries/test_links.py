"""Links to deliveries: the filtered list's query built in one place, and each model's own page, followed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.deliveries.links import DELIVERY_LIST_FILTERS, deliveries_list_query, deliveries_list_url
from dashboard.deliveries.models import Delivery, ErrorGroup, Stream
from dashboard.web.forms import DeliveryFilterForm
from tests.factories import history_record, make_source, store

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"
OTHER_STREAM = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


def listed(client: Client, url: str) -> set[str]:
    response = client.get(url)
    assert response.status_code == 200, url
    return set(re.findall(r'href="/deliveries/([0-9a-f-]{36})/"', response.content.decode()))


def test_the_filter_names_are_the_deliveries_forms_fields() -> None:
    # Paging cursors ("after", "before") are the list's own; links start on the first page.
    assert set(DELIVERY_LIST_FILTERS) == set(DeliveryFilterForm.base_fields) - {"after", "before"}


def test_the_query_keeps_one_order_and_leaves_out_empty_filters() -> None:
    assert deliveries_list_query(group=7, status="failing", stream=STREAM, tag="", chain=None) == (
        f"stream={STREAM}&status=failing&group=7"
    )
    assert deliveries_list_url(url="https://hooks.example.com/a b?x=1") == (
        "/deliveries/?url=https%3A%2F%2Fhooks.example.com%2Fa+b%3Fx%3D1"
    )
    assert deliveries_list_url() == "/deliveries/"


def test_an_unknown_filter_is_an_error_not_a_link_to_everything() -> None:
    with pytest.raises(TypeError, match="no filter stream_id"):
        deliveries_list_url(stream_id=STREAM)


@pytest.mark.django_db
def test_each_models_url_opens_its_page_or_its_deliveries(logged_in_client: Client) -> None:
    now = timezone.now()
    source = make_source()
    refused = [
        history_record(date=now - timedelta(minutes=i), error="connect ECONNREFUSED 203.0.113.7:443")
        for i in range(1, 3)
    ]
    delivered = history_record(date=now - timedelta(minutes=3))
    elsewhere = history_record(date=now - timedelta(minutes=4), stream_id=OTHER_STREAM, error="hang up")
    store(source, *refused, delivered, elsewhere)

    stream = Stream.objects.get(stream_id=STREAM)
    # A stream opens its own page, which links to its deliveries.
    assert stream.get_absolute_url() == f"/streams/{STREAM}/"
    assert logged_in_client.get(stream.get_absolute_url()).status_code == 200
    assert listed(logged_in_client, f"/deliveries/?stream={STREAM}") == {r["id"] for r in [*refused, delivered]}

    group = ErrorGroup.objects.get(template__startswith="connect ECONNREFUSED")
    assert group.get_absolute_url() == f"/deliveries/?group={group.pk}"
    assert listed(logged_in_client, group.get_absolute_url()) == {r["id"] for r in refused}

    delivery = Delivery.objects.get(pk=delivered["id"])
    assert delivery.get_absolute_url() == f"/deliveries/{delivery.pk}/"
    response = logged_in_client.get(delivery.get_absolute_url())
    assert response.status_code == 200 and response.context["d"] == delivery
