"""The admin in the dashboard's look: its stylesheet, header and brand, and ISO UTC dates in change lists and
read-only fields, written by the same home as the dashboard's (dashboard/times.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard import times
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from tests.admin.conftest import NOW, history_record

pytestmark = pytest.mark.django_db

ISO_NOW = "2026-11-20 12:00:00 UTC"


@pytest.fixture
def delivery(plain_source: Any) -> Delivery:
    record = history_record(error="Request failed with status code 500", retries=1)
    store_records(plain_source, [record], now=NOW)
    return Delivery.objects.get(pk=record["id"])


def test_the_change_list_and_the_detail_show_iso_utc_dates(staff_client: Client, delivery: Delivery) -> None:
    listed = staff_client.get("/admin/deliveries/delivery/").content.decode()
    assert f">{ISO_NOW}<" in listed
    assert "a.m." not in listed and "Nov." not in listed
    detail = staff_client.get(f"/admin/deliveries/delivery/{delivery.pk}/change/").content.decode()
    assert ISO_NOW in detail
    # The same text the dashboard writes for the same moment.
    assert times.iso(delivery.date) == ISO_NOW


def test_read_only_sync_times_of_a_source_are_iso_utc(staff_client: Client, plain_source: Any) -> None:
    plain_source.last_success_at = NOW
    plain_source.save(update_fields=["last_success_at"])
    listed = staff_client.get("/admin/sources/source/").content.decode()
    assert ISO_NOW in listed
    detail = staff_client.get(f"/admin/sources/source/{plain_source.pk}/change/").content.decode()
    assert ISO_NOW in detail


def test_the_admin_wears_the_dashboards_stylesheet_and_header(staff_client: Client) -> None:
    for url in ("/admin/", "/admin/deliveries/delivery/", "/admin/alerts/incident/"):
        body = staff_client.get(url).content.decode()
        assert "dashboard/theme.css" in body and "dashboard/admin.css" in body, url
        # The dashboard's brand, linking back to it, instead of "Django administration".
        assert '<span class="brand-mark" aria-hidden="true"></span>Stream Dashboard</a>' in body, url
        assert 'href="/">Dashboard</a>' in body, url
        assert "Django administration" not in body and "dark_mode.css" not in body, url


def test_the_dashboard_and_the_admin_share_one_theme(logged_in: Client) -> None:
    body = logged_in.get("/").content.decode()
    assert body.index("dashboard/theme.css") < body.index("dashboard/app.css")


@pytest.fixture
def logged_in(staff_client: Client) -> Client:
    return staff_client


def test_an_admin_login_page_has_the_header_too(client: Client) -> None:
    body = client.get("/admin/login/").content.decode()
    assert "dashboard/theme.css" in body and "Stream Dashboard" in body
