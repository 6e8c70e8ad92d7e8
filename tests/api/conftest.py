"""The API's tests: callers of every kind, and a small world of one delivery, stream, error group and incident."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboard.actions.models import ProviderAction
from dashboard.actions.services import prepare_replay
from dashboard.alerts.models import AlertRule, Incident, TargetKind
from dashboard.api.tokens import create_token
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from tests.conftest import make_user
from tests.factories import history_record, make_source, store

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings: Any) -> None:
    # The rate limit lives in the Redis cache, which outlives a test's database.
    cache.clear()
    settings.API_RATE_PER_MINUTE = 10_000


def token_for(user: User, scopes: list[str], *, days: int = 30, name: str = "deploy-bot") -> str:
    return create_token(user, name, scopes, timezone.now() + timedelta(days=days))[1]


def bearer(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def staff_without_act(username: str = "sam") -> User:
    """Staff in every way the incident pages check, without the permission to act at the provider."""
    user = make_user(username, role=None)
    user.is_staff = True
    user.save()
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="accounts", codename__in=["view_dashboard", "manage_dashboard"])
    )
    return User.objects.get(pk=user.pk)


@dataclass
class World:
    delivery: Delivery
    incident: Incident
    group_id: int
    action: ProviderAction


@pytest.fixture
def world(db: None) -> World:
    source = make_source()
    now = timezone.now()
    store(
        source,
        history_record(date=now - timedelta(minutes=10), error="connect ECONNREFUSED 10.0.0.1:443", retries=2),
        history_record(date=now - timedelta(minutes=20)),
        history_record(date=now - timedelta(minutes=30), error="connect ECONNREFUSED 10.0.0.2:443", retries=1),
    )
    failing = Delivery.objects.exclude(error_message="").order_by("-date").first()
    assert failing is not None and failing.error_group_id is not None
    rule = AlertRule.objects.create(name="API test rule")
    incident = Incident.objects.create(
        rule=rule, target_kind=TargetKind.STREAM, target_key=STREAM, stream_id=STREAM, summary="stream orders failing",
        opened_at=now, last_holding_at=now, message_id="<i1@example.com>",
    )
    requester = make_user("requester", staff=True)
    action = prepare_replay(requester, Delivery.objects.filter(pk=failing.pk), scope="Replay one delivery")
    return World(failing, incident, failing.error_group_id, action)


@pytest.fixture
def provider_says_active(world: World) -> Iterator[None]:
    """A status change reads the stream's status at the provider first: a real HTTP server on loopback answers
    `GET /streams/evm/{id}` with the stream "active", and every source reads its streams there."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            found = self.path.rstrip("/").endswith(f"/streams/evm/{STREAM}")
            body = json.dumps({"id": STREAM, "status": "active", "statusMessage": "", "tag": "orders",
                               "webhookUrl": "https://hooks.example.com/moralis", "chainIds": ["0x1"],
                               "description": ""} if found else {"message": "Stream not found"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Source.objects.update(streams_base_url=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def answers_keep_to_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer of the API a test receives through Django's test client is checked against the OpenAPI document
    (tests/api/openapi_check.py): a documented status, and a body its schema validates."""
    from tests.api import openapi_check

    request = Client.request

    def checked(self: Client, **environ: Any) -> Any:
        response = request(self, **environ)
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(openapi_check.PREFIX + "/") and not getattr(response, "streaming", False):
            openapi_check.check(str(environ.get("REQUEST_METHOD", "GET")), path, response.status_code,
                                response.get("Content-Type", ""), response.content)
        return response

    monkeypatch.setattr(Client, "request", checked)
