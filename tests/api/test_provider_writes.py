"""A stream's reactivation or pause and the re-send of a scan's missing blocks through the API: the pages' two
steps (a draft that says what will happen, then a confirmation), audited under the token's name, refused as the
pages refuse; and exactly once: a draft confirmed twice, or by two clients at once, is one action queued once."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.actions.models import (
    ActionKind,
    ActionState,
    BlockScan,
    PreviewedBlock,
    ProviderAction,
    ScanState,
)
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from tests.api.conftest import STREAM, World, bearer, token_for
from tests.conftest import make_user


@pytest.fixture(autouse=True)
def _provider_says_active(provider_says_active: None) -> None:
    """Every source reads its streams at a loopback provider that has the stream "active" (tests/api/conftest.py)."""


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    started: list[int] = []
    monkeypatch.setattr("dashboard.api.actions.run_action_task.delay", started.append)
    return started


def _client(name: str = "alice", token: str = "deploy-bot") -> Client:
    return bearer(token_for(make_user(name, staff=True), ["read", "act"], name=token))


def _pause(client: Client) -> Any:
    return client.post(f"/api/v1/streams/{STREAM}/status", {"status": "paused"}, content_type="application/json")


def _scan(blocks: list[int]) -> BlockScan:
    now = timezone.now()
    window = OutageWindow.objects.create(
        stream=Stream.objects.get(stream_id=STREAM), kind=WindowKind.MARKED, label="address reload",
        start=now - timedelta(hours=2), end=now - timedelta(hours=1),
    )
    scan = BlockScan.objects.create(window=window, stream_id=STREAM, requested_by_name="x", state=ScanState.DONE)
    for number in blocks:
        PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=number, matched=True, records=1)
    return scan


@pytest.mark.django_db
def test_a_pause_is_prepared_in_words_then_confirmed_once(
    world: World, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    client = _client()
    response = _pause(client)
    assert response.status_code == 200, response.content
    body = response.json()
    draft = body["action"]
    assert draft["state"] == "draft" and draft["kind"] == ActionKind.SET_STATUS and draft["confirm_before"]
    assert draft["scope"].startswith("Pause stream") and "status active → paused" in draft["scope"]
    assert draft["requested_by"] == "alice (token deploy-bot)"
    assert body["status_read"] == "as the provider answered just now"
    assert queued == []
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(f"/api/v1/actions/{draft['id']}/confirm").json()
        second = client.post(f"/api/v1/actions/{draft['id']}/confirm").json()
    assert first["changed"] is True and first["action"]["state"] == ActionState.QUEUED
    assert second["changed"] is False
    assert queued == [draft["id"]]
    assert ProviderAction.objects.get(pk=draft["id"]).requested_by_name == "alice (token deploy-bot)"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "message"),
    [("active", "already active"), ("error", "active or paused"), ("", "active or paused")],
)
def test_a_status_change_the_page_refuses_is_a_400(world: World, status: str, message: str) -> None:
    response = _client().post(f"/api/v1/streams/{STREAM}/status", {"status": status}, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert message in response.json()["detail"]
    assert not ProviderAction.objects.filter(kind=ActionKind.SET_STATUS).exists()


@pytest.mark.django_db
def test_an_unknown_stream_is_a_404(world: World) -> None:
    response = _client().post("/api/v1/streams/nope/status", {"status": "paused"}, content_type="application/json")
    assert response.status_code == 404


@pytest.mark.django_db
def test_writes_off_refuses_a_status_change_and_a_resend(world: World, settings: Any) -> None:
    scan = _scan([99_999_999])
    settings.PROVIDER_WRITES = False
    client = _client()
    assert _pause(client).status_code == 403
    assert client.post(f"/api/v1/scans/{scan.pk}/resend").status_code == 403
    assert not ProviderAction.objects.exclude(pk=world.action.pk).exists()


@pytest.mark.django_db
def test_a_scans_missing_blocks_are_resent_once(
    world: World, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    scan = _scan([99_999_998, 99_999_999])
    client = _client()
    response = client.post(f"/api/v1/scans/{scan.pk}/resend")
    assert response.status_code == 200, response.content
    draft = response.json()["action"]
    assert draft["kind"] == ActionKind.RESEND_BLOCKS and draft["target_count"] == 2 and draft["confirm_before"]
    assert draft["scope"].startswith("Re-send 2 missing blocks (chain 0x1, blocks 99999998–99999999)")
    assert draft["requested_by"] == "alice (token deploy-bot)"
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/api/v1/actions/{draft['id']}/confirm").json()["changed"] is True
        assert client.post(f"/api/v1/actions/{draft['id']}/confirm").json()["changed"] is False
    assert queued == [draft["id"]]
    # Each block is re-sent once: once asked for, a second re-send has nothing left.
    again = client.post(f"/api/v1/scans/{scan.pk}/resend")
    assert again.status_code == 400 and "No missing block is left" in again.json()["detail"]


@pytest.mark.django_db
def test_a_running_scan_cannot_be_resent_and_an_unknown_one_is_a_404(world: World) -> None:
    scan = _scan([99_999_999])
    BlockScan.objects.filter(pk=scan.pk).update(state=ScanState.RUNNING)
    client = _client()
    response = client.post(f"/api/v1/scans/{scan.pk}/resend")
    assert response.status_code == 400 and "Wait for the scan to finish" in response.json()["detail"]
    assert client.post("/api/v1/scans/999999/resend").status_code == 404


def _confirm_at_once(clients: list[Client], action_id: int) -> list[Any]:
    """Each client confirms from its own thread (its own database connection), all released together."""
    barrier = threading.Barrier(len(clients))
    answers: list[Any] = [None] * len(clients)

    def confirm(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            answers[index] = clients[index].post(f"/api/v1/actions/{action_id}/confirm")
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(index,)) for index in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["replay", "status change"])
def test_two_clients_confirming_at_once_queue_one_action_once(world: World, queued: list[int], kind: str) -> None:
    alice, bob = _client("alice", "deploy-bot"), _client("bob", "runbook")
    if kind == "replay":
        prepared = alice.post("/api/v1/actions/replays", {"filters": {"status": "failing"}},
                              content_type="application/json")
    else:
        prepared = _pause(alice)
    assert prepared.status_code == 200, prepared.content
    action_id = prepared.json()["action"]["id"]
    answers = _confirm_at_once([alice, bob], action_id)
    assert [answer.status_code for answer in answers] == [200, 200]
    assert sorted(answer.json()["changed"] for answer in answers) == [False, True]
    assert queued == [action_id]
    assert ProviderAction.objects.get(pk=action_id).state == ActionState.QUEUED
    # One action: the confirmations made no other.
    assert ProviderAction.objects.exclude(pk=world.action.pk).count() == 1
