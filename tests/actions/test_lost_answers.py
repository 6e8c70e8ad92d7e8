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
from tests.actions.conftest import client_for
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
        # 1: log a replay one retry higher, as a provider that counts a replay as a retry would.
        self.replay_retry_bump = 0
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
                "webhookUrl": record["webhookUrl"], "tag": record["tag"],
                "retries": tiny["retries"] + self.replay_retry_bump,
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
    # A 429 is asked again; a lost answer is re-read, never re-sent: one POST past the 429s for every delivery.
    assert {i: state.posts[i] for i in ids} == {ids[0]: 3, ids[1]: 1, ids[2]: 1, ids[3]: 2, ids[4]: 1, ids[5]: 1}
    assert {i: state.acted[i] for i in ids} == {i: 0 if i == ids[2] else 1 for i in ids}
    assert sum(state.acted.values()) == len(ids) - 1, "nothing outside the filter was replayed"
    items = {str(i.delivery_id): i for i in ReplayItem.objects.filter(action=action)}
    assert {i: items[i].state for i in ids} == {
        i: ItemState.UNKNOWN if i == ids[2] else ItemState.REPLAYED for i in ids
    }
    assert "logs show the attempt" in items[ids[1]].answer
    # A request lost before the provider acted: the logs show no attempt, and it is left for a person (the logs
    # may lag behind; a second request could be a second replay).
    assert "show no attempt" in items[ids[2]].answer and "not sent again" in items[ids[2]].answer
    action.refresh_from_db()
    assert action.state == ActionState.PARTIAL and action.answer.startswith("5 of 6 replayed")
    assert "1 answer lost" in action.answer
    page = client_for(staff).get(f"/actions/{action.pk}/").content.decode()
    assert page.count("Answer lost: check and replay by hand if needed") == 2, "the item's row and its count"


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
    # The worker claimed the first delivery, sent its replay (the provider acted) and died before recording the
    # answer.
    ReplayItem.objects.filter(action=action, delivery_id=ids[0]).update(
        state=ItemState.SENDING, sent_at=datetime.now(UTC)
    )
    state.replay(ids[0])
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


# -- over the simulator, a provider that counts a replay as a retry ------------------------------------------


class AnswerDroppingProxy:
    """Between the worker and the simulator, on loopback: passes every request on, and hangs up on a replay after
    the simulator answered it, so the provider acted and the worker never hears of it. Counts the replay POSTs
    that reached the simulator."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.posts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def forward(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str, bytes]:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.upstream + path, method=method, headers=headers,
                                         data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, answer.headers.get("Content-Type", "application/json"), answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Content-Type", "application/json"), exc.read()


@pytest.fixture
def dropping_proxy(live_sim: Any) -> Iterator[tuple[AnswerDroppingProxy, str]]:
    proxy = AnswerDroppingProxy(live_sim.base_url)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _headers(self) -> dict[str, str]:
            return {"X-API-Key": self.headers.get("X-API-Key", "")}

        def do_GET(self) -> None:  # noqa: N802
            status, content_type, body = proxy.forward("GET", self.path, self._headers())
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.startswith("/history/replay/"):
                with proxy.lock:
                    proxy.posts[self.path.rstrip("/").rsplit("/", 1)[-1]] += 1
            proxy.forward("POST", self.path, self._headers())
            # The simulator acted and answered; the worker gets a closed connection instead.
            self.close_connection = True
            self.connection.shutdown(2)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield proxy, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def live_sim(make_simulator: Any) -> Any:
    """A simulator whose clock is ours (the real time, running): a replay is logged at the moment it is made, and
    the worker compares that with the moment its request went out. Its scripted trouble began eight minutes ago:
    the swap stream's slow receiver has failed minutes of deliveries, each of whose next retry (11 or 71 minutes
    after its first attempt) is still well ahead, whether or not the provider has put the stream in `error` yet
    (some 7 to 20 minutes in, by the chain's activity at the real time)."""
    now = datetime.now(UTC)
    return make_simulator(start=now, scenario_start=now - timedelta(minutes=8), speed=1.0)


def test_a_bulk_replay_whose_answers_are_lost_sends_each_delivery_once_when_the_provider_counts_it_as_a_retry(
    db: None, live_sim: Any, dropping_proxy: tuple[AnswerDroppingProxy, str], staff: Any, no_stale_locks: None
) -> None:
    from dashboard.actions.attempts import SCHEDULE_SLACK
    from dashboard.deliveries.models import Stream
    from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES, attempt_at
    from dashboard.polling.stream_sync import sync_streams
    from dashboard.polling.walks import poll
    from dashboard.upstream.streams import set_stream_status
    from tests.actions.test_replay import replays_made
    from tests.conftest import SIMULATOR_KEY
    from tests.factories import source_for

    proxy, proxy_url = dropping_proxy
    source = source_for(live_sim)
    for _ in range(20):
        if poll(source).complete and source.synced_through is not None:
            break
        source.refresh_from_db()
    now = datetime.now(UTC)
    # The case of the defect: recent failures, whose next retry (the count a replay logged one retry higher
    # names) is still ahead; on one stream, paused at the provider: a paused stream takes replays, and the
    # replays failing again cannot put it in `error` part way (only an active stream goes there), which would
    # refuse the rest with answers that are lost too.
    sync_streams(source)
    usable = Stream.objects.filter(source=source).exclude(provider_status="terminated").values_list("stream_id")
    recent = [
        d for d in Delivery.objects.filter(source=source, stream_id__in=usable).failures()
        if d.retries < MAX_RETRIES and attempt_at(d.date, d.retries + 1) > now
    ]
    assert recent, "the scenario has recent failures"
    stream_id = Counter(d.stream_id for d in recent).most_common(1)[0][0]
    direct = UpstreamClient(live_sim.base_url, ClientSettings(api_key=SIMULATOR_KEY))
    if Stream.objects.get(source=source, stream_id=stream_id).provider_status != "paused":
        set_stream_status(direct, stream_id, "paused")
    failing = list(Delivery.objects.filter(source=source, stream_id=stream_id).failures().order_by("-date")[:40])
    live_sim.world.faults.replay_counts_as_retry = True
    action = services.prepare_replay(staff, Delivery.objects.filter(pk__in=[d.pk for d in failing]), scope="test")
    ProviderAction.objects.filter(pk=action.pk).update(state=ActionState.QUEUED)
    client = UpstreamClient(proxy_url, ClientSettings(api_key=SIMULATOR_KEY, connect_timeout=2, read_timeout=5,
                                                      max_retries=3, backoff_cap=0.01))

    for _ in range(3):  # the run, and redeliveries of its task
        assert services.run_action(action.pk, client=client, sleep=lambda s: None).finished

    ids = [str(d.pk) for d in failing]
    assert {i: proxy.posts[i] for i in ids} == {i: 1 for i in ids}, "each delivery was sent once"
    assert sum(proxy.posts.values()) == len(ids)
    items = {str(i.delivery_id): i for i in ReplayItem.objects.filter(action=action)}
    assert {i: replays_made(live_sim, i) for i in ids} == {i: 1 for i in ids}, "each replay made once"
    # Recognised from the logs, unless the schedule placed an attempt of the block in the same seconds: then the
    # item is left for a person, not sent again.
    firsts: dict[tuple[str, int | None], list[datetime]] = {}
    for d in Delivery.objects.filter(source=source, stream_id=stream_id, block_number__in=[d.block_number for d in failing]):
        firsts.setdefault((d.stream_id, d.block_number), []).append(d.date)
    recognised = []
    for d in failing:
        item = items[str(d.pk)]
        assert item.sent_at is not None
        # The provider logged our attempt somewhere between the request going out and the answer (lost or not):
        # on a loaded machine that can be seconds; a scheduled attempt within the classifier's slack of that
        # span makes the line ambiguous.
        span_end = (item.answered_at or item.sent_at) + SCHEDULE_SLACK + timedelta(seconds=10)
        span_start = item.sent_at - SCHEDULE_SLACK - timedelta(seconds=10)
        near = any(span_start <= first + timedelta(seconds=offset) <= span_end
                   for first in firsts[(d.stream_id, d.block_number)] for offset in ATTEMPT_OFFSETS)
        if near:
            assert item.state in (ItemState.REPLAYED, ItemState.UNKNOWN)
            continue
        assert item.state == ItemState.REPLAYED and "logs show the attempt" in item.answer, item.answer
        if d.retries < MAX_RETRIES and attempt_at(d.date, d.retries + 1) > now:
            recognised.append(d.pk)
    assert recognised, "a replay of a recent failure, logged one retry higher, was recognised"
