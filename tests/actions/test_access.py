"""Every write URL, tried as anonymous, viewer, staff without the permission, with writes switched off and
without CSRF: no action row is written and nothing reaches the provider. The audit is for staff and is
append-only."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, transaction
from django.test import Client

from dashboard.actions import services
from dashboard.actions.models import ProviderAction
from dashboard.deliveries.models import Delivery, Stream
from tests.actions.conftest import client_for
from tests.conftest import make_user
from tests.factories import history_record, make_source, store


@pytest.fixture
def targets(db: None, staff: Any) -> dict[str, Any]:
    source = make_source()
    store(source, history_record(error="Request failed with status code 500"))
    delivery = Delivery.objects.get()
    stream = Stream.objects.get()
    Stream.objects.filter(pk=stream.pk).update(provider_status="error", provider_chain_ids=["0x1"])
    draft = services.prepare_replay(staff, Delivery.objects.all(), scope="one delivery")
    return {"delivery": delivery, "stream": stream, "draft": draft}


def write_requests(t: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    return [
        ("/actions/replay/", {"delivery": str(t["delivery"].pk)}),
        ("/actions/replay/", {"filters": "status=failing"}),
        (f"/streams/{t['stream'].stream_id}/status/", {"status": "active"}),
        ("/actions/resend-block/", {"stream": t["stream"].stream_id, "chain": "0x1", "block": "19000000"}),
        (f"/actions/{t['draft'].pk}/confirm/", {}),
        (f"/actions/{t['draft'].pk}/cancel/", {}),
    ]


def assert_nothing_written(t: dict[str, Any]) -> None:
    assert ProviderAction.objects.count() == 1
    t["draft"].refresh_from_db()
    assert t["draft"].state == "draft"


def test_anonymous_users_are_sent_to_the_login_page(targets: dict[str, Any]) -> None:
    for url, data in write_requests(targets):
        response = Client().post(url, data)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    assert_nothing_written(targets)


@pytest.mark.parametrize("who", ["viewer", "staff without the permission"])
def test_users_without_the_permission_get_403(targets: dict[str, Any], staff_without_permission: Any, who: str) -> None:
    user = make_user("viewer-user") if who == "viewer" else staff_without_permission
    client = client_for(user)
    for url, data in write_requests(targets):
        response = client.post(url, data)
        assert response.status_code == 403, url
        assert "may not act at the provider" in response.content.decode(), url
    assert_nothing_written(targets)


def test_with_writes_switched_off_even_a_superuser_gets_403(targets: dict[str, Any], settings: Any) -> None:
    settings.PROVIDER_WRITES = False
    client = client_for(make_user("root", staff=True))
    for url, data in write_requests(targets):
        response = client.post(url, data)
        assert response.status_code == 403 and "PROVIDER_WRITES" in response.content.decode(), url
    assert_nothing_written(targets)
    page = client.get(f"/deliveries/{targets['delivery'].pk}/").content.decode()
    assert "Replay…" not in page


def test_every_write_needs_csrf(targets: dict[str, Any], staff: Any) -> None:
    client = client_for(staff, csrf=True)
    for url, data in write_requests(targets):
        assert client.post(url, data).status_code == 403, url
    assert_nothing_written(targets)


def test_writes_are_posts_only(targets: dict[str, Any], staff_client: Client) -> None:
    for url, _data in write_requests(targets):
        assert staff_client.get(url).status_code == 405, url


def test_the_audit_is_for_staff(targets: dict[str, Any], staff_client: Client) -> None:
    viewer = client_for(make_user("viewer-user"))
    assert viewer.get("/actions/").status_code == 403
    assert viewer.get(f"/actions/{targets['draft'].pk}/").status_code == 403
    assert staff_client.get("/actions/").status_code == 200
    assert staff_client.get(f"/actions/{targets['draft'].pk}/").status_code == 200
    assert staff_client.get("/actions/999999/").status_code == 404


def test_the_audit_is_append_only(targets: dict[str, Any]) -> None:
    with pytest.raises(DatabaseError), transaction.atomic():
        ProviderAction.objects.filter(pk=targets["draft"].pk).delete()
    assert ProviderAction.objects.filter(pk=targets["draft"].pk).exists()


def test_the_audit_is_read_only_in_the_admin(targets: dict[str, Any]) -> None:
    root = client_for(make_user("root", staff=True))
    url = f"/admin/actions/provideraction/{targets['draft'].pk}/change/"
    page = root.get(url)
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert root.get("/admin/actions/provideraction/add/").status_code == 403
