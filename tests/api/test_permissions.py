"""The same permissions as the pages, per endpoint: anonymous, a viewer, staff without the action permission,
tokens without the scope or whose user lacks the role, an expired and a revoked token."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from dashboard.actions.models import BlockScan, PreviewedBlock, ScanState
from dashboard.alerts.channels import store_settings
from dashboard.alerts.models import Channel, ChannelKind
from dashboard.api.models import ApiToken
from dashboard.api.urls import api
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.expectations.models import MaintenanceWindow
from tests.api.conftest import STREAM, World, bearer, staff_without_act, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

READ, WRITE, AUDIT, ACT = "read", "incident change", "action read", "action at the provider"
# Every operation of the API: (method, path template, kind). A test below checks the list against the document.
ENDPOINTS = [
    ("get", "/api/v1/deliveries", READ),
    ("get", "/api/v1/deliveries/{delivery_id}", READ),
    ("get", "/api/v1/streams", READ),
    ("get", "/api/v1/streams/{stream_id}", READ),
    ("get", "/api/v1/error-groups", READ),
    ("get", "/api/v1/error-groups/{group_id}", READ),
    ("get", "/api/v1/incidents", READ),
    ("get", "/api/v1/incidents/{incident_id}", READ),
    ("post", "/api/v1/incidents/{incident_id}/acknowledge", WRITE),
    ("post", "/api/v1/incidents/{incident_id}/notes", WRITE),
    ("post", "/api/v1/incidents/{incident_id}/resolve", WRITE),
    ("post", "/api/v1/incidents/{incident_id}/assign", WRITE),
    ("post", "/api/v1/incidents/{incident_id}/snooze", WRITE),
    ("post", "/api/v1/actions/replays", ACT),
    ("get", "/api/v1/actions/{action_id}", AUDIT),
    ("post", "/api/v1/actions/{action_id}/confirm", ACT),
    ("post", "/api/v1/actions/{action_id}/cancel", ACT),
    ("post", "/api/v1/streams/{stream_id}/status", ACT),
    ("post", "/api/v1/scans/{scan_id}/resend", ACT),
    ("get", "/api/v1/timeline", READ),
    ("get", "/api/v1/latency", READ),
    ("get", "/api/v1/retries", READ),
    ("get", "/api/v1/streams/{stream_id}/objectives", READ),
    ("get", "/api/v1/streams/{stream_id}/windows", READ),
    ("get", "/api/v1/windows/{window_id}", READ),
    ("get", "/api/v1/windows/{window_id}/missing-blocks", READ),
    ("get", "/api/v1/actions", AUDIT),
]
ADMIN = "administration"
# The administration endpoints: scope `admin`, and the admin's permission on the model (staff).
ENDPOINTS += [
    ("get", "/api/v1/alert-rules", ADMIN),
    ("post", "/api/v1/alert-rules", ADMIN),
    ("get", "/api/v1/alert-rules/{rule_id}", ADMIN),
    ("patch", "/api/v1/alert-rules/{rule_id}", ADMIN),
    ("delete", "/api/v1/alert-rules/{rule_id}", ADMIN),
    ("get", "/api/v1/channels", ADMIN),
    ("post", "/api/v1/channels", ADMIN),
    ("get", "/api/v1/channels/{channel_id}", ADMIN),
    ("patch", "/api/v1/channels/{channel_id}", ADMIN),
    ("delete", "/api/v1/channels/{channel_id}", ADMIN),
    ("post", "/api/v1/channels/{channel_id}/test", ADMIN),
    ("get", "/api/v1/maintenance-windows", ADMIN),
    ("post", "/api/v1/maintenance-windows", ADMIN),
    ("delete", "/api/v1/maintenance-windows/{maintenance_window_id}", ADMIN),
]


def _session(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _anonymous() -> Client:
    return Client()


def _viewer() -> Client:
    return _session(make_user("vera"))


def _staff_without_act() -> Client:
    return _session(staff_without_act())


def _staff() -> Client:
    return _session(make_user("root", staff=True))


def _token(scopes: list[str], *, staff: bool = True) -> Callable[[], Client]:
    def make() -> Client:
        user = make_user("ops", staff=True) if staff else make_user("vic")
        return bearer(token_for(user, scopes))

    return make


def _expired() -> Client:
    user = make_user("ops", staff=True)
    secret = token_for(user, ["read", "act"])
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    return bearer(secret)


def _revoked() -> Client:
    user = make_user("ops", staff=True)
    secret = token_for(user, ["read", "act"])
    ApiToken.objects.update(revoked_at=timezone.now())
    return bearer(secret)


def _no_role_token() -> Client:
    return bearer(token_for(make_user("nobody", role=None), ["read", "act"]))


# caller: (make the client, {kind: status})
CALLERS: dict[str, tuple[Callable[[], Client], dict[str, int]]] = {
    "anonymous": (_anonymous, {READ: 401, WRITE: 401, AUDIT: 401, ACT: 401}),
    "viewer": (_viewer, {READ: 200, WRITE: 403, AUDIT: 403, ACT: 403}),
    "staff without the action permission": (_staff_without_act, {READ: 200, WRITE: 200, AUDIT: 403, ACT: 403}),
    "staff": (_staff, {READ: 200, WRITE: 200, AUDIT: 200, ACT: 200}),
    "token read, staff user": (_token(["read"]), {READ: 200, WRITE: 403, AUDIT: 200, ACT: 403}),
    "token act only, staff user": (_token(["act"]), {READ: 403, WRITE: 200, AUDIT: 403, ACT: 200}),
    "token read+act, viewer user": (_token(["read", "act"], staff=False), {READ: 200, WRITE: 403, AUDIT: 403, ACT: 403}),
    "token read+act, user without a role": (_no_role_token, {READ: 403, WRITE: 403, AUDIT: 403, ACT: 403}),
    "token read+act, staff user": (_token(["read", "act"]), {READ: 200, WRITE: 200, AUDIT: 200, ACT: 200}),
    "expired token": (_expired, {READ: 401, WRITE: 401, AUDIT: 401, ACT: 401}),
    "revoked token": (_revoked, {READ: 401, WRITE: 401, AUDIT: 401, ACT: 401}),
}


def _staff_role_token() -> Client:
    return bearer(token_for(make_user("stella", role="Staff"), ["admin"]))


CALLERS |= {
    "token admin, superuser": (_token(["admin"]), {READ: 403, WRITE: 403, AUDIT: 403, ACT: 403}),
    "token admin, Staff role": (_staff_role_token, {READ: 403, WRITE: 403, AUDIT: 403, ACT: 403}),
    "token admin, viewer user": (_token(["admin"], staff=False), {READ: 403, WRITE: 403, AUDIT: 403, ACT: 403}),
}
# Per caller, the administration endpoints' answer: staff without the admin's permission on alerts and
# expectations ("staff without the action permission" holds only the dashboard's roles) and tokens without the
# scope `admin` are refused.
ADMIN_STATUSES = {
    "anonymous": 401, "viewer": 403, "staff without the action permission": 403, "staff": 200,
    "token read, staff user": 403, "token act only, staff user": 403, "token read+act, viewer user": 403,
    "token read+act, user without a role": 403, "token read+act, staff user": 403, "expired token": 401,
    "revoked token": 401, "token admin, superuser": 200, "token admin, Staff role": 200,
    "token admin, viewer user": 403,
}


def _window_id(template: str) -> int:
    if "{window_id}" not in template:
        return 0
    now = timezone.now()
    return OutageWindow.objects.create(
        stream=Stream.objects.get(stream_id=STREAM), kind=WindowKind.MARKED, label="address reload",
        start=now - timedelta(hours=2), end=now - timedelta(hours=1),
    ).pk


def _url(template: str, world: World) -> str:
    return template.format(
        delivery_id=world.delivery.pk, stream_id=STREAM, group_id=world.group_id, incident_id=world.incident.pk,
        action_id=world.action.pk, window_id=_window_id(template), scan_id=_scan_id(template),
        **_admin_ids(template, world),
    )


def _scan_id(template: str) -> int:
    """A finished scan of the world's stream that found one block missing."""
    if "{scan_id}" not in template:
        return 0
    now = timezone.now()
    window = OutageWindow.objects.create(
        stream=Stream.objects.get(stream_id=STREAM), kind=WindowKind.MARKED, label="address reload",
        start=now - timedelta(hours=2), end=now - timedelta(hours=1),
    )
    scan = BlockScan.objects.create(window=window, stream_id=STREAM, requested_by_name="x", state=ScanState.DONE)
    PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=99_999_999, matched=True, records=1)
    return scan.pk


@pytest.fixture(autouse=True)
def _provider_says_active(provider_says_active: None) -> None:
    """A status change reads the stream's status at the provider first: a loopback provider answers "active"."""


def _admin_ids(template: str, world: World) -> dict[str, int]:
    channel = None
    if "{channel_id}" in template:
        channel = Channel(name="matrix", kind=ChannelKind.SLACK)
        store_settings(channel, url=ADMIN_BODIES["/api/v1/channels"]["url"], secret=None)
        channel.save()
    window = MaintenanceWindow.objects.create(
        name="matrix", scope="all", cron="0 3 * * *", duration_minutes=5
    ) if "{maintenance_window_id}" in template else None
    return {"rule_id": world.incident.rule_id, "channel_id": channel.pk if channel else 0,
            "maintenance_window_id": window.pk if window else 0}


ADMIN_BODIES: dict[str, dict[str, Any]] = {
    "/api/v1/alert-rules": {"name": "matrix rule"},
    "/api/v1/channels": {"name": "matrix slack", "kind": "slack",
                         "url": "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"},
    "/api/v1/maintenance-windows": {"name": "matrix", "scope": "all", "cron": "0 3 * * *", "duration_minutes": 5},
}


def _call(client: Client, method: str, url: str) -> Any:
    if method in ("patch", "delete") or (method == "post" and (url in ADMIN_BODIES or url.endswith("/test"))):
        body = ADMIN_BODIES.get(url, {"enabled": False} if method == "patch" else {})
        return getattr(client, method)(url, body, content_type="application/json")
    if method == "post":
        body: dict[str, Any] = {}
        if url.endswith("/notes"):
            body = {"text": "looking"}
        elif url.endswith("/replays"):
            body = {"filters": {"status": "failing"}}
        elif url.endswith("/assign"):
            body = {"assignee": None}
        elif url.endswith("/snooze"):
            body = {"minutes": 60}
        elif url.endswith("/status"):
            body = {"status": "paused"}
        return client.post(url, body, content_type="application/json")
    return client.get(url)


@pytest.mark.parametrize("caller", list(CALLERS))
@pytest.mark.parametrize(("method", "template", "kind"), ENDPOINTS)
def test_it_allows_what_the_pages_allow(world: World, caller: str, method: str, template: str, kind: str) -> None:
    make, statuses = CALLERS[caller]
    response = _call(make(), method, _url(template, world))
    expected = ADMIN_STATUSES[caller] if kind == ADMIN else statuses[kind]
    if expected == 200 and method == "delete":
        expected = 204
    assert response.status_code == expected, response.content
    if expected not in (200, 204):
        assert response["Content-Type"] == "application/problem+json"
        body = response.json()
        assert body["status"] == expected
        if expected == 401:
            assert response["WWW-Authenticate"].startswith("Bearer")
        if expected == 403:
            assert "scope" in body["detail"] or "lacks the" in body["detail"]


def test_it_names_the_missing_scope_or_permission(world: World) -> None:
    response = _token(["read"])().post(f"/api/v1/incidents/{world.incident.pk}/acknowledge")
    assert response.json()["detail"] == "The token lacks the scope `act`."
    response = _token(["read", "act"], staff=False)().post(f"/api/v1/incidents/{world.incident.pk}/acknowledge")
    assert response.json()["detail"] == "The user lacks the staff role (accounts.manage_dashboard)."


def test_every_operation_is_in_the_matrix() -> None:
    document = api.get_openapi_schema(path_prefix="/api/v1/")
    operations = {(method, path) for path, methods in document["paths"].items() for method in methods}
    assert operations == {(method, path) for method, path, _ in ENDPOINTS}


def test_a_user_who_loses_the_role_loses_it_through_the_token_at_once(world: World) -> None:
    user = make_user("ops", staff=True)
    client = bearer(token_for(user, ["read"]))
    assert client.get("/api/v1/streams").status_code == 200
    user.is_superuser = False
    user.save()
    assert client.get("/api/v1/streams").status_code == 403


def test_a_session_change_needs_the_csrf_token(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("root", staff=True))
    response = client.post(f"/api/v1/incidents/{world.incident.pk}/acknowledge")
    assert response.status_code == 403
    assert response.json()["type"].endswith(":csrf")
    client.get("/account/tokens/")  # sets the CSRF cookie, as any page does
    token = client.cookies["csrftoken"].value
    response = client.post(f"/api/v1/incidents/{world.incident.pk}/acknowledge", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200


def test_a_token_call_needs_no_csrf_token(world: World) -> None:
    secret = token_for(make_user("ops", staff=True), ["read", "act"])
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.post(f"/api/v1/incidents/{world.incident.pk}/acknowledge").status_code == 200
