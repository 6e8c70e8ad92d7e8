"""Against a provider written here, independent of the simulator, on loopback: 429s, answers lost after the
provider acted, requests lost before it did, and a worker that died mid-request. Every targeted delivery is
replayed exactly once, and nothing else."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dashboard.actions import services
from dashboard.actions.models import ActionState, ItemState, ProviderAction, ReplayItem
from dashboard.deliveries.models import Delivery
from dashboard.upstream.client import ClientSettings, UpstreamClient
from tests.factories import history_record, make_source, store

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"


class Provider:
    """Replays by id: a script of behaviours per delivery ("429", "drop-after", "drop-before", "ok")."""

    def __init__(self) -> None:
        self.acted: Counter[str] = Counter()
        self.posts: Counter[str] = Counter()
        self.script: dict[str, list[str]] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.logs: list[dict[str, Any]] = []
        self.logs_available = True
        self.lock = threading.Lock()

    def replay(self, history_id: str) -> tuple[str, dict[str, Any] | None]:
        with self.lock:
            self.posts[history_id] += 1
            steps = self.script.get(history_id) or ["ok"]
            step = steps.pop(0) if len(steps) > 1 else steps[0]
            if step in ("429", "drop-before"):
                return step, None
            self.acted[history_id] += 1
            record = dict(self.records[history_id], errorMessage="")
            tiny = record["tinyPayload"]
            self.logs.insert(0, {
                "id": str(uuid.uuid4()), "streamId": record["streamId"], "chain": tiny["chainId"],
                "webhookUrl": record["webhookUrl"], "tag": record["tag"], "retries": tiny["retries"],
                "deliveryStatus": "success", "blockNumber": int(tiny["block"]), "errorMessage": "",
                "type": "evm", "createdAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            })
            return step, record


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    state = Provider()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            parts = self.path.strip("/").split("/")
            if parts[:2] != ["history", "replay"] or len(parts) != 4:
                return self._send(404, {"message": "Not found"})
            step, record = state.replay(parts[3])
            if step == "429":
                return self._send(429, {"message": "Rate limit exceeded"}, {"Retry-After": "0"})
            if step in ("drop-after", "drop-before"):
                # The connection closes with no answer: the client cannot tell whether the provider acted.
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return None
            return self._send(200, record)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/history/logs"):
                if not state.logs_available:
                    return self._send(404, {"message": "Not found"})
                with state.lock:
                    return self._send(200, {"result": list(state.logs), "total": len(state.logs)})
            return self._send(404, {"message": "Not found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def prepared(provider: Provider, base_url: str, user: Any, n: int) -> tuple[ProviderAction, list[str]]:
    source = make_source(base_url=base_url)
    when = datetime.now(UTC) - timedelta(hours=3)
    records = [
        history_record(date=when + timedelta(seconds=i), error="Request failed with status code 500",
                       retries=3, block=20_000_000 + i, stream_id=STREAM)
        for i in range(n)
    ]
    store(source, *records)
    for r in records:
        provider.records[r["id"]] = r
    # One delivery outside the filter: never replayed.
    store(source, history_record(date=when, stream_id="6d7a3c2e-0000-4000-8000-000000000001"))
    action = services.prepare_replay(user, Delivery.objects.filter(stream_id=STREAM), scope="test")
    ProviderAction.objects.filter(pk=action.pk).update(state=ActionState.QUEUED)
    return action, [r["id"] for r in records]


def quick_client(base_url: str) -> UpstreamClient:
    return UpstreamClient(base_url, ClientSettings(api_key="k", connect_timeout=2, read_timeout=2, max_retries=3,
                                                   backoff_cap=0.01))


def test_429s_and_lost_answers_end_with_each_delivery_replayed_exactly_once(
    provider: tuple[Provider, str], staff: Any
) -> None:
    state, base_url = provider
    action, ids = prepared(state, base_url, staff, 6)
    state.script = {
        ids[0]: ["429", "429", "ok"],
        ids[1]: ["drop-after", "ok"],
        ids[2]: ["drop-before", "ok"],
        ids[3]: ["429", "drop-after", "ok"],
    }
    outcome = services.run_action(action.pk, client=quick_client(base_url), sleep=lambda s: None)
    assert outcome.finished
    assert {i: state.acted[i] for i in ids} == {i: 1 for i in ids}
    assert sum(state.acted.values()) == len(ids), "nothing outside the filter was replayed"
    # A lost answer was re-read, not re-sent: one POST for an answer lost after acting.
    assert state.posts[ids[1]] == 1
    # A request lost before the provider acted was found missing from the logs and sent again.
    assert state.posts[ids[2]] == 2
    items = {str(i.delivery_id): i for i in ReplayItem.objects.filter(action=action)}
    assert all(i.state == ItemState.REPLAYED for i in items.values())
    assert "logs show the attempt" in items[ids[1]].answer
    action.refresh_from_db()
    assert action.state == ActionState.DONE and action.answer.startswith("6 of 6 replayed")


def test_a_redelivered_task_continues_without_sending_twice(provider: tuple[Provider, str], staff: Any) -> None:
    state, base_url = provider
    action, ids = prepared(state, base_url, staff, 3)
    services.run_action(action.pk, client=quick_client(base_url), sleep=lambda s: None)
    # The same task again (a redelivery after the worker was lost), and a copy of it.
    for _ in range(2):
        assert services.run_action(action.pk, client=quick_client(base_url)).finished
    assert {i: state.posts[i] for i in ids} == {i: 1 for i in ids}


def test_an_item_a_dead_worker_left_mid_request_is_read_back_not_resent(
    provider: tuple[Provider, str], staff: Any
) -> None:
    state, base_url = provider
    action, ids = prepared(state, base_url, staff, 2)
    # The worker sent the first replay (the provider acted) and died before recording the answer.
    state.replay(ids[0])
    ReplayItem.objects.filter(action=action, delivery_id=ids[0]).update(state=ItemState.SENDING)
    services.run_action(action.pk, client=quick_client(base_url), sleep=lambda s: None)
    assert state.acted[ids[0]] == 1 and state.posts[ids[0]] == 1
    assert state.acted[ids[1]] == 1
    item = ReplayItem.objects.get(action=action, delivery_id=ids[0])
    assert item.state == ItemState.REPLAYED and item.rereads == 1


def test_without_the_logs_a_lost_answer_stays_unknown_and_is_not_resent(
    provider: tuple[Provider, str], staff: Any
) -> None:
    state, base_url = provider
    state.logs_available = False
    action, ids = prepared(state, base_url, staff, 1)
    state.script = {ids[0]: ["drop-after", "ok"]}
    services.run_action(action.pk, client=quick_client(base_url), sleep=lambda s: None)
    assert state.posts[ids[0]] == 1
    item = ReplayItem.objects.get(action=action)
    assert item.state == ItemState.UNKNOWN and "not sent again" in item.answer
