"""Maintenance windows on the pages: the list of active and upcoming windows, the stream page's banner and the
Streams page's mark, for the streams a window covers and no other."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.expectations.models import MaintenanceWindow
from dashboard.sources.models import Source
from tests.web.conftest import STREAM_A, STREAM_B, URL_B, record, store

pytestmark = pytest.mark.django_db


@pytest.fixture
def windows(plain_source: Source) -> None:
    now = timezone.now()
    store(plain_source, record(date=now - timedelta(minutes=3)),
          record(date=now - timedelta(minutes=4), stream_id=STREAM_B, tag="beta", url=URL_B))
    MaintenanceWindow.objects.create(name="Receiver upgrade", scope="tag", scope_value="alpha",
                                     starts_at=now - timedelta(minutes=10), ends_at=now + timedelta(hours=1),
                                     reason="new load balancer")
    MaintenanceWindow.objects.create(name="Sunday nights", scope="all", cron="0 3 * * 0", duration_minutes=90,
                                     time_zone="Europe/Berlin")


def test_the_list_shows_active_and_upcoming_windows(windows: None, logged_in_client: Client) -> None:
    response = logged_in_client.get("/maintenance/")
    assert response.status_code == 200
    assert [o.window.name for o in response.context["active"]] == ["Receiver upgrade"]
    assert "Sunday nights" in [o.window.name for o in response.context["upcoming"]]
    html = response.content.decode()
    assert "new load balancer" in html and "At 03:00 on Sunday (Europe/Berlin), for 90 min" in html


def test_the_stream_page_says_the_stream_is_in_maintenance(windows: None, logged_in_client: Client) -> None:
    html = logged_in_client.get(f"/streams/{STREAM_A}/").content.decode()
    assert 'id="maintenance-banner"' in html and "Receiver upgrade" in html
    assert 'id="maintenance-banner"' not in logged_in_client.get(f"/streams/{STREAM_B}/").content.decode()


def test_the_streams_page_marks_the_streams_in_maintenance(windows: None, logged_in_client: Client) -> None:
    html = logged_in_client.get("/streams/").content.decode()
    assert html.count(">in maintenance</a>") == 1
