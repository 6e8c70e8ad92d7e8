from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.deliveries.models import Delivery
from dashboard.polling.walks import poll_head
from dashboard.sources.models import Source

pytestmark = pytest.mark.django_db


def test_it_requires_login(client: Client) -> None:
    response = client.get("/deliveries/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_lists_the_stored_deliveries(simulator: Any, source: Source, logged_in_client: Client) -> None:
    poll_head(source)
    newest = Delivery.objects.newest_first().first()
    assert newest is not None

    response = logged_in_client.get("/deliveries/")

    assert response.status_code == 200
    body = response.content.decode()
    assert newest.tag in body
    assert newest.webhook_url in body
    assert newest.date.strftime("%Y-%m-%d %H:%M:%S") in body
