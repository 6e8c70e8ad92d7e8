"""Replays through the API: a draft by the list's filters with its count and scope, confirmed once, followed,
cancelled; audited under the token's name; the pages' refusals."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from dashboard.actions.models import ActionState, ItemState, ProviderAction
from tests.api.conftest import STREAM, World, bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(world: World) -> Client:
    return bearer(token_for(make_user("alice", staff=True), ["read", "act"], name="deploy-bot"))


def _prepare(client: Client, filters: dict[str, str]) -> Any:
    return client.post("/api/v1/actions/replays", {"filters": filters}, content_type="application/json")


def test_a_replay_is_prepared_from_the_lists_filters(client: Client) -> None:
    response = _prepare(client, {"status": "failing", "stream": STREAM})
    assert response.status_code == 200, response.content
    action = response.json()["action"]
    assert action["state"] == "draft" and action["target_count"] == 2
    assert action["requested_by"] == "alice (token deploy-bot)"
    assert "status=failing" in action["scope"] and action["confirm_before"]
    assert action["counts"] == {"pending": 2}
    row = ProviderAction.objects.get(pk=action["id"])
    assert row.requested_by_name == "alice (token deploy-bot)" and row.filters == f"status=failing&stream={STREAM}"


def test_confirming_twice_queues_once(client: Client, monkeypatch: Any, django_capture_on_commit_callbacks: Any) -> None:
    queued: list[int] = []
    monkeypatch.setattr("dashboard.api.actions.run_action_task.delay", queued.append)
    action_id = _prepare(client, {"status": "failing"}).json()["action"]["id"]
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(f"/api/v1/actions/{action_id}/confirm").json()
        second = client.post(f"/api/v1/actions/{action_id}/confirm").json()
    assert first["changed"] is True and first["action"]["state"] == "queued"
    assert second["changed"] is False
    assert queued == [action_id]
    progress = client.get(f"/api/v1/actions/{action_id}").json()
    assert progress["done"] == 0 and progress["target_count"] == 2 and len(progress["items"]) == 2


def test_a_cancelled_draft_sends_nothing(client: Client) -> None:
    action_id = _prepare(client, {"status": "failing"}).json()["action"]["id"]
    body = client.post(f"/api/v1/actions/{action_id}/cancel").json()
    assert body["changed"] is True and body["action"]["state"] == "cancelled"
    assert set(body["action"]["counts"]) == {ItemState.SKIPPED}
    assert client.post(f"/api/v1/actions/{action_id}/confirm").json()["changed"] is False


def test_a_draft_past_its_deadline_is_refused(client: Client) -> None:
    action_id = _prepare(client, {"status": "failing"}).json()["action"]["id"]
    ProviderAction.objects.filter(pk=action_id).update(created_at=ProviderAction.objects.get(pk=action_id).created_at
                                                       - timedelta(days=1))
    response = client.post(f"/api/v1/actions/{action_id}/confirm")
    assert response.status_code == 400 and "confirmed" in response.json()["detail"]
    assert ProviderAction.objects.get(pk=action_id).state == ActionState.EXPIRED


@pytest.mark.parametrize(
    ("filters", "says"),
    [
        ({"statu": "failing"}, "Unknown filter: statu"),
        ({"cursor": "x"}, "Unknown filter: cursor"),
        ({"status": "sleeping"}, "not valid"),
        ({"tag": "no-such-tag"}, "nothing to replay"),
    ],
)
def test_bad_filters_are_refused(client: Client, filters: dict[str, str], says: str) -> None:
    response = _prepare(client, filters)
    assert response.status_code == 400
    body = response.json()
    assert says in body["detail"] + " ".join(body.get("errors") or [])
    assert not ProviderAction.objects.exclude(scope="Replay one delivery").exists()


def test_provider_writes_off_refuses_every_action(client: Client, settings: Any) -> None:
    settings.PROVIDER_WRITES = False
    response = _prepare(client, {"status": "failing"})
    assert response.status_code == 403
    assert "actions.act_at_provider" in response.json()["detail"]
