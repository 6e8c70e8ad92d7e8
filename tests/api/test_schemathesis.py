"""Property-based checks of the API from its own OpenAPI document (Schemathesis): every GET operation, called with
a valid `read` token over a small world, with parameters drawn from the document's schemas, answers no 500, only
statuses, content types and bodies the document describes, and every error as application/problem+json."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from dashboard.actions.models import BlockScan, PreviewedBlock, ScanState
from dashboard.api.urls import api
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from tests.api.conftest import STREAM, World, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

# Examples per operation: enough to reach every parameter's edges, few enough that all of them run in seconds.
EXAMPLES = 25


def problem_json(ctx: Any, response: Any, case: Any) -> bool | None:
    """An error answers application/problem+json with the problem's members."""
    if response.status_code < 400:
        return None
    content_type = response.headers.get("content-type", [""])
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    assert content_type == "application/problem+json", f"{response.status_code} answered {content_type!r}"
    body = response.json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body), body
    assert body["status"] == response.status_code
    return True


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          problem_json]


@pytest.fixture
def in_test_transaction(settings: Any) -> Iterator[None]:
    """The WSGI handler closes the database connection after each request, which would end the test's transaction;
    Django's test client keeps it open the same way. Schemathesis' requests name the host `localhost`, which the
    settings allow only where DEBUG or ALLOWED_HOSTS says so: allowed here."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _schema(method: str | None = "GET") -> Any:
    schema = schemathesis.openapi.from_dict(api.get_openapi_schema(path_prefix="/api/v1/"))
    schema.app = get_wsgi_application()
    return schema.include(method=method) if method else schema


def _known_ids(world: World) -> dict[str, Any]:
    """Path parameters that name objects of the world, so detail operations answer 200 as well as 404."""
    now = timezone.now()
    stream = Stream.objects.get(stream_id=STREAM)
    window = OutageWindow.objects.create(stream=stream, kind=WindowKind.MARKED, label="address reload",
                                         start=now - timedelta(hours=3), end=now - timedelta(hours=2))
    scan = BlockScan.objects.create(window=window, source=stream.source, stream_id=STREAM, state=ScanState.DONE,
                                    requested_by_name="ops", planned=2, previewed=2, matched=1)
    PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=7, matched=True, records=1)
    PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=8, matched=False)
    return {
        "delivery_id": str(world.delivery.pk), "stream_id": STREAM, "group_id": world.group_id,
        "incident_id": world.incident.pk, "action_id": world.action.pk, "window_id": window.pk,
    }


def _run(operations: list[Any], headers: dict[str, str], known: dict[str, Any], examples: int) -> None:
    for operation in operations:

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=st.one_of(*(operation.as_strategy(generation_mode=mode) for mode in GenerationMode)),
               name_known=st.booleans())
        def check(case: Any, name_known: bool) -> None:
            if name_known and case.path_parameters:
                case.path_parameters = {
                    name: known.get(name, value) for name, value in case.path_parameters.items()
                }
            case.call_and_validate(headers=headers, checks=CHECKS)

        check()


def _read_token(scopes: tuple[str, ...] = ("read",)) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(make_user('fuzz', staff=True), list(scopes))}"}


def test_every_get_operation_keeps_to_the_document(world: World, in_test_transaction: None) -> None:
    """Valid and invalid parameters (Schemathesis' positive and negative modes), ids of the world's objects half
    the time."""
    operations = [result.ok() for result in _schema().get_all_operations()]
    assert len(operations) >= 15
    _run(operations, _read_token(), _known_ids(world), EXAMPLES)


@pytest.mark.parametrize("scopes", [("act",), ("admin",), ("read", "act", "admin")])
def test_tokens_of_every_scope_get_documented_answers(
    world: World, in_test_transaction: None, scopes: tuple[str, ...]
) -> None:
    """With another scope a GET is refused (403) or answered, each as the document says; fewer examples."""
    operations = [result.ok() for result in _schema().get_all_operations()]
    _run(operations, _read_token(scopes), _known_ids(world), 5)


def test_the_checks_catch_a_500(world: World, in_test_transaction: None, monkeypatch: Any) -> None:
    def broken(now: Any) -> Any:
        raise RuntimeError("broken")

    monkeypatch.setattr("dashboard.api.streams.stream_entries", broken)
    operations = [op for op in (result.ok() for result in _schema().get_all_operations()) if op.path.endswith("/streams")]
    assert len(operations) == 1
    with pytest.raises(FailureGroup, match="Server error"):
        _run(operations, _read_token(), {}, 5)


def test_every_write_operation_keeps_to_the_document(
    world: World, in_test_transaction: None, provider_says_active: None, settings: Any
) -> None:
    """POST, PATCH and DELETE with a token of every scope, writes at the provider allowed (the provider a loopback
    server; a confirmed action's task is queued only after a commit, which the test's transaction never makes):
    valid and invalid bodies and ids are answered or refused as the document says, never with a 500."""
    settings.PROVIDER_WRITES = True
    operations = [result.ok() for result in _schema(method=None).exclude(method="GET").get_all_operations()]
    assert len(operations) >= 15
    _run(operations, _read_token(("read", "act", "admin")), _known_ids(world), 10)
