"""Viewers read the dashboard and never reach the admin; the decorators other apps use."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory

from dashboard.accounts.access import staff_required, viewer_required
from dashboard.accounts.roles import STAFF, VIEWERS
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from tests.admin.conftest import NOW, client_for, history_record, make_role_user
from tests.conftest import make_user


@pytest.fixture
def delivery(plain_source: Source) -> Delivery:
    record = history_record(error="socket hang up", retries=1, tag="secret-tag-of-a-stream")
    store_records(plain_source, [record], now=NOW)
    return Delivery.objects.get(pk=record["id"])


def assert_no_data(response: Any, *secrets: str) -> None:
    assert response.status_code in (302, 403) or b"login" in response.content.lower()
    if response.status_code == 302:
        assert "/admin/login/" in response["Location"] or "/accounts/login/" in response["Location"]
    for secret in secrets:
        assert secret.encode() not in response.content


def test_a_viewer_never_sees_admin_pages(
    viewer_client: Client, delivery: Delivery, plain_source: Source
) -> None:
    secrets = (str(delivery.pk), "secret-tag-of-a-stream", plain_source.api_key, plain_source.name)
    urls = [
        "/admin/", "/admin/deliveries/delivery/", f"/admin/deliveries/delivery/{delivery.pk}/change/",
        f"/admin/deliveries/delivery/?q={delivery.pk}", "/admin/deliveries/errorgroup/",
        "/admin/sources/source/", f"/admin/sources/source/{plain_source.pk}/change/",
        f"/admin/sources/source/{plain_source.pk}/history/", "/admin/auth/user/", "/admin/auth/user/add/",
        "/admin/auth/group/",
    ]
    for url in urls:
        response = viewer_client.get(url)
        assert_no_data(response, *secrets)
        followed = viewer_client.get(url, follow=True)
        assert followed.status_code in (200, 403)
        # The login page carries the requested URL (?next=), which may hold an id the viewer typed.
        assert_no_data(followed, *(s for s in secrets if s not in url))
        if followed.status_code == 200:
            assert b"not authorized to access this page" in followed.content


def test_a_viewer_cannot_change_anything(viewer_client: Client, viewer: User, plain_source: Source) -> None:
    posts = [
        (f"/admin/sources/source/{plain_source.pk}/change/",
         {"name": "hijacked", "new_api_key": "attacker-key", "streams_base_url": "http://evil.example"}),
        ("/admin/sources/source/add/", {"name": "new", "new_api_key": "k"}),
        (f"/admin/sources/source/{plain_source.pk}/test-connection/", {}),
        ("/admin/sources/source/", {"action": "test_connection_action", "_selected_action": [plain_source.pk]}),
        (f"/admin/auth/user/{viewer.pk}/change/", {"username": viewer.username, "is_staff": "on",
                                                   "is_superuser": "on"}),
        ("/admin/auth/user/add/", {"username": "mallory", "password1": "x" * 20, "password2": "x" * 20}),
    ]
    for url, data in posts:
        response = viewer_client.post(url, data)
        assert_no_data(response, plain_source.api_key)
    plain_source.refresh_from_db()
    assert plain_source.name == "plain" and plain_source.api_key == "plain-source-secret-key-0001"
    viewer.refresh_from_db()
    assert not viewer.is_staff and not viewer.is_superuser
    assert not User.objects.filter(username="mallory").exists()
    assert Source.objects.count() == 1


def test_anonymous_users_get_the_login_page(client: Client, delivery: Delivery) -> None:
    for url in ("/admin/", "/admin/deliveries/delivery/", "/admin/sources/source/"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_reach_the_admin_without_being_superusers(staff_client: Client, delivery: Delivery) -> None:
    assert staff_client.get("/admin/deliveries/delivery/").status_code == 200
    assert staff_client.get(f"/admin/deliveries/delivery/{delivery.pk}/change/").status_code == 200
    assert staff_client.get("/admin/sources/source/add/").status_code == 200
    assert staff_client.get("/admin/auth/user/").status_code == 200
    # Users and groups are changed by superusers only.
    assert staff_client.get("/admin/auth/user/add/").status_code == 403


# --- decorators ---------------------------------------------------------------------------------------


@viewer_required
def reading_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("read")


@staff_required
def changing_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse("changed")


def call(view: Any, user: Any) -> Any:
    request = RequestFactory().post("/somewhere/")
    request.user = user
    try:
        return view(request).status_code
    except PermissionDenied:
        return 403


def test_the_decorators(db: None) -> None:
    viewer = make_role_user("v", VIEWERS)
    staff = make_role_user("s", STAFF)
    superuser = make_user("root", staff=True)
    no_role = make_user("nobody", role=None)
    is_staff_without_role = make_user("flagged", role=None)
    is_staff_without_role.is_staff = True
    is_staff_without_role.save()
    inactive = make_role_user("gone", STAFF)
    inactive.is_active = False
    inactive.save()

    assert call(reading_view, AnonymousUser()) == 302
    assert call(changing_view, AnonymousUser()) == 302
    expected = {
        viewer: (200, 403),
        staff: (200, 200),
        superuser: (200, 200),
        no_role: (403, 403),
        is_staff_without_role: (403, 403),
    }
    for user, (read, change) in expected.items():
        user = User.objects.get(pk=user.pk)
        assert (call(reading_view, user), call(changing_view, user)) == (read, change), user.username
    assert call(reading_view, User.objects.get(pk=inactive.pk)) in (302, 403)


def test_a_viewer_logs_in_to_the_dashboard_but_not_the_admin(client: Client, db: None) -> None:
    make_role_user("vic", VIEWERS)
    response = client.post("/admin/login/", {"username": "vic", "password": "correct-horse-battery"})
    assert response.status_code == 200
    assert b"correct username and password for a staff account" in response.content
    assert client_for(User.objects.get(username="vic")).get("/admin/").status_code == 302
