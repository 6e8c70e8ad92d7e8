"""Head polls, retry-window revisits and backfills against the simulator over HTTP: complete, never twice,
and following records the upstream changes after they were first seen."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command

from dashboard.deliveries import ingest
from dashboard.deliveries.models import Delivery
from dashboard.locks import redis_client
from dashboard.polling import walks
from dashboard.polling.jobs import source_lock_name
from dashboard.polling.models import HistoryWalk, WalkKind
from dashboard.polling.walks import poll, poll_head, revisit_retry_window, walk_history
from dashboard.sources.clients import streams_client
from dashboard.sources.models import Source
from dashboard.upstream.errors import BadResponse
from tests.checks import assert_derived_exact, assert_matches_upstream, truth
from tests.conftest import START
from tests.factories import source_for
from tests.polling.children import manage, wait_for_walk_pages


@pytest.mark.django_db
def test_the_first_poll_stores_the_whole_history_and_marks_it_synced(sim: Any, sim_source: Source) -> None:
    result = poll(sim_source)

    assert result.complete
    assert_matches_upstream(sim)
    assert_derived_exact()
    sim_source.refresh_from_db()
    newest = max(Delivery.objects.values_list("date", flat=True))
    assert sim_source.synced_through == newest == sim_source.newest_upstream_date
    assert sim_source.records_last_poll == len(truth(sim))


@pytest.mark.django_db
def test_a_head_poll_reads_only_the_new_pages(sim: Any, sim_source: Source) -> None:
    poll_head(sim_source)
    sim.world.clock.advance(3 * 3600)
    before = sim.world.requests_served

    result = poll_head(sim_source)

    # Three hours of records fit on one or two pages; the walk stops at what was stored.
    assert 1 <= sim.world.requests_served - before <= 2
    assert result.stored.inserted > 0
    new_ids = set(truth(sim))
    assert new_ids <= set(Delivery.objects.values_list("id", flat=True))


@pytest.mark.django_db
def test_a_head_poll_walks_past_new_pages_even_when_a_skewed_date_moved_the_synced_mark(
    sim: Any, sim_source: Source
) -> None:
    poll_head(sim_source)
    # A record once stamped a day ahead by a skewed clock: every record now dates below the synced mark.
    Source.objects.filter(pk=sim_source.pk).update(synced_through=START + timedelta(days=1))
    sim_source.refresh_from_db()
    sim.world.clock.advance(20 * 3600)
    new = set(truth(sim)) - set(Delivery.objects.values_list("id", flat=True))
    assert len(new) > 150, "the new records should fill several pages"

    poll_head(sim_source)

    # The walk went on past the pages of new records to the first page holding stored ones (records changed
    # in place further down are the revisit's job).
    assert set(truth(sim)) <= set(Delivery.objects.values_list("id", flat=True))
    assert_derived_exact()


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_a_backfill_with_a_word_not_a_traceback(make_simulator: Any) -> None:
    sim = make_simulator(history_window_days=3)
    source = source_for(sim)
    sim.world.faults.latency_ms = 120
    # Another poll holds the source: the command says it waits instead of sitting silent.
    redis_client().set(f"lock:{source_lock_name(source.pk)}", "another-poll", ex=60)
    child = manage("backfill_history", "--source", source.name, "--no-progress")
    try:
        assert child.stdout is not None
        assert "a poll of this source is running; waiting up to 300 s" in child.stdout.readline()
        redis_client().delete(f"lock:{source_lock_name(source.pk)}")
        wait_for_walk_pages(source, "backfill", 2, child)
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()

    assert child.returncode == 130
    assert "interrupted; run the command again to resume where it stopped" in output
    assert "Traceback" not in output
    assert not HistoryWalk.objects.get(source=source, kind="backfill").finished


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_the_polling_loop_with_a_word(make_simulator: Any) -> None:
    sim = make_simulator()
    source = source_for(sim)
    child = manage("poll_history", "--source", source.name, POLL_INTERVAL_SECONDS="1")
    try:
        assert child.stdout is not None
        # The command's own report of its first poll (log lines come first).
        lines = iter(child.stdout.readline, "")
        assert any(line.startswith(f"{source.name}: ") and " new, " in line for line in lines)
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()

    assert child.returncode == 0
    assert "stopped; the next poll continues from the checkpoint" in output
    assert "Traceback" not in output
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_records_changed_after_first_seen_are_followed(sim: Any, sim_source: Source) -> None:
    # Five minutes into the scenario the swaps' slow receiver has deliveries on their retry schedule (at the
    # start, the failures in the window are those of the stream in error, whose retries have stopped).
    sim.world.clock.advance(5 * 60)
    poll(sim_source)
    failing = Delivery.objects.failures().count()
    assert failing > 0, "the simulator should have failures in its window"

    # Time passes: retries happen, some deliveries recover, others fail again; the oldest records expire.
    sim.world.clock.advance(2 * 3600)
    sim_source.refresh_from_db()
    result = revisit_retry_window(sim_source)
    head = poll_head(sim_source)

    assert result.stored.updated > 0
    assert_matches_upstream(sim)
    assert_derived_exact()
    # Records that left the upstream's window stay stored.
    assert Delivery.objects.count() > len(truth(sim))
    assert head.complete


@pytest.mark.django_db
def test_the_revisit_runs_when_due(sim: Any, sim_source: Source, settings: Any) -> None:
    poll(sim_source)
    sim.world.clock.advance(3600)
    sim_source.refresh_from_db()
    Source.objects.filter(pk=sim_source.pk).update(last_revisit_at=None)
    sim_source.refresh_from_db()

    result = poll(sim_source)

    assert result.revisited
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db
def test_the_revisit_gets_only_what_the_head_walk_left_of_the_poll_budget(
    sim: Any, sim_source: Source, settings: Any
) -> None:
    poll(sim_source)
    sim.world.clock.advance(3600)
    Source.objects.filter(pk=sim_source.pk).update(last_revisit_at=None)
    sim_source.refresh_from_db()
    # Every answer takes longer than the whole budget: the head walk's one page uses it up.
    settings.POLL_TIME_BUDGET_SECONDS = 0.5
    sim.world.faults.latency_ms = 800

    result = poll(sim_source)

    # A fresh budget for the revisit would let it take a page past the task's limit; it waits for the next poll.
    assert result.complete and not result.revisited
    assert not HistoryWalk.objects.filter(source=sim_source, kind=WalkKind.REVISIT).exists()
    sim.world.faults.latency_ms = 0
    settings.POLL_TIME_BUDGET_SECONDS = 60
    assert poll(sim_source).revisited
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_a_long_revisit_goes_on_over_several_polls_after_each_head_walk(
    sim: Any, sim_source: Source, settings: Any
) -> None:
    poll(sim_source)
    sim.world.clock.advance(3600)
    Source.objects.filter(pk=sim_source.pk).update(last_revisit_at=None)
    sim_source.refresh_from_db()
    settings.REVISIT_SLICE_SECONDS = 0.2
    sim.world.faults.latency_ms = 300

    first = poll(sim_source)

    # One page of the revisit fits the slice; the walk keeps its place.
    revisit = HistoryWalk.objects.get(source=sim_source, kind=WalkKind.REVISIT)
    assert first.revisited and not first.complete
    assert revisit.pages == 1 and not revisit.finished
    sim.world.clock.advance(600)
    new = set(truth(sim)) - set(Delivery.objects.values_list("id", flat=True))
    assert new

    second = poll(sim_source)

    # The next poll read the new records at the head first, then took the revisit's next page.
    assert new <= set(Delivery.objects.values_list("id", flat=True))
    assert second.revisited
    revisit.refresh_from_db()
    assert revisit.pages == 2
    sim.world.faults.latency_ms = 0
    settings.REVISIT_SLICE_SECONDS = 60
    assert poll(sim_source).complete
    revisit.refresh_from_db()
    assert revisit.finished
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db
def test_a_page_that_fails_half_way_writes_nothing_and_the_next_run_completes(
    sim: Any, sim_source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    original = ingest.add_to_rollups

    def failing(*args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("killed mid-page")
        original(*args)

    monkeypatch.setattr(ingest, "add_to_rollups", failing)
    with pytest.raises(RuntimeError):
        poll_head(sim_source)
    walk = HistoryWalk.objects.get(source=sim_source, kind="head")
    assert walk.pages == 2 and not walk.finished
    assert Delivery.objects.count() == 2 * 100
    sim_source.refresh_from_db()
    assert sim_source.last_error_kind == "internal"

    monkeypatch.setattr(ingest, "add_to_rollups", original)
    poll_head(sim_source)

    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db(transaction=True)
def test_a_backfill_killed_mid_walk_resumes_without_refetching(make_simulator: Any) -> None:
    sim = make_simulator(history_window_days=3)
    source = source_for(sim)
    pages_total = -(-len(truth(sim)) // 100)
    sim.world.faults.latency_ms = 120
    child = manage("backfill_history", "--source", source.name, "--no-progress")
    try:
        wait_for_walk_pages(source, "backfill", 3, child)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    stored_pages = HistoryWalk.objects.get(source=source, kind="backfill").pages
    assert 3 <= stored_pages < pages_total
    sim.world.faults.latency_ms = 0
    # The dead process's poll lock would free by itself after one lease (test_locks measures it); here it
    # is dropped at once.
    redis_client().delete(f"lock:{source_lock_name(source.pk)}")
    requests_before = sim.world.requests_served

    call_command("backfill_history", "--source", source.name, "--no-progress")

    assert sim.world.requests_served - requests_before == pages_total - stored_pages
    walk = HistoryWalk.objects.get(source=source, kind="backfill")
    assert walk.finished and walk.pages == pages_total
    assert_matches_upstream(sim)
    assert_derived_exact()
    source.refresh_from_db()
    assert source.synced_through == max(Delivery.objects.values_list("date", flat=True))


@pytest.mark.django_db
def test_backfill_reports_completion_and_restarts_on_request(
    sim: Any, sim_source: Source, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("backfill_history", "--source", "sim", "--no-progress")
    assert "backfill complete" in capsys.readouterr().out
    requests = sim.world.requests_served

    call_command("backfill_history", "--source", "sim", "--no-progress")
    assert "already complete" in capsys.readouterr().out
    assert sim.world.requests_served == requests

    call_command("backfill_history", "--source", "sim", "--no-progress", "--restart")
    assert "0 new" in capsys.readouterr().out
    assert sim.world.requests_served > requests
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_backfill_shows_records_rate_and_eta(sim: Any, sim_source: Source, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("backfill_history", "--source", "sim")
    err = capsys.readouterr().err
    total = len(truth(sim))
    assert f"{total}/{total}" in err and "records/s" in err


class _TwoPageHistory(BaseHTTPRequestHandler):
    """A hand-written upstream of two history pages of two records each; subclasses choose each page's body."""

    base_date: datetime | None = None  # None: the current time

    def records(self, page: int, **fields: Any) -> list[dict[str, Any]]:
        base = self.base_date or datetime.now(UTC)
        return [
            {
                "id": str(uuid.UUID(int=page * 10 + i + 1)),
                "date": (base - timedelta(minutes=page * 10 + i)).isoformat().replace("+00:00", "Z"),
                "errorMessage": "",
                "tinyPayload": {"chainId": "0x1", "confirmed": True, "block": "1", "records": 0, "retries": 0},
                **fields,
            }
            for i in range(2)
        ]

    def page_body(self, page: int) -> dict[str, Any]:
        raise NotImplementedError

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        cursor = parse_qs(urlsplit(self.path).query).get("cursor", [""])[0]
        data = json.dumps(self.page_body(1 if cursor == "page-2" else 0)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        pass


@contextmanager
def _source_served_by(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[Source]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        yield Source.objects.create(
            name=name, api_key="k", streams_base_url=base, evm_base_url=base,
            aptos_mainnet_base_url=base, aptos_testnet_base_url=base,
        )
    finally:
        server.shutdown()
        server.server_close()


class _CircularHistory(_TwoPageHistory):
    """An upstream whose second page hands back the cursor of the first: followed naively, a walk never ends."""

    def page_body(self, page: int) -> dict[str, Any]:
        records = self.records(
            page, webhookUrl="https://hooks.example.com/circular", streamId="00000000-0000-4000-8000-00000000c1c1",
            tag="circular", payload={},
        )
        return {"result": records, "cursor": "page-2", "total": 4}


@pytest.mark.django_db
def test_a_cursor_that_comes_back_ends_the_walk_with_an_error_not_a_loop() -> None:
    with _source_served_by(_CircularHistory, "circular") as source, pytest.raises(
        BadResponse, match="cursor it had already given"
    ):
        poll_head(source, budget_seconds=30)

    # Both pages were stored once; the walk is closed, nothing is claimed as synced, and the error shows.
    assert Delivery.objects.filter(source=source).count() == 4
    source.refresh_from_db()
    assert source.synced_through is None
    assert "cursor it had already given" in source.last_error_message
    walk = HistoryWalk.objects.get(source=source)
    assert walk.finished_at is not None and walk.pages == 2


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["head", "revisit"])
def test_a_saved_cursor_the_upstream_no_longer_accepts_starts_the_walk_again(
    sim: Any, sim_source: Source, kind: str
) -> None:
    if kind == "head":
        poll_head(sim_source, max_pages=2)
    else:
        poll_head(sim_source)
        sim.world.clock.advance(2 * 3600)
        sim_source.refresh_from_db()
        walk_history(sim_source, WalkKind.REVISIT, client=streams_client(sim_source),
                     stop_before=sim_source.newest_upstream_date - timedelta(hours=20), max_pages=2)
    walk = HistoryWalk.objects.get(source=sim_source, kind=kind)
    assert not walk.finished and walk.cursor
    # What a checkpoint looks like once its cursor expired or the upstream re-signed its cursors.
    HistoryWalk.objects.filter(pk=walk.pk).update(cursor=walk.cursor[:-6] + "AAAAAA")
    sim_source.refresh_from_db()

    result = poll_head(sim_source) if kind == "head" else revisit_retry_window(sim_source)

    assert result.complete
    walk.refresh_from_db()
    assert walk.finished
    assert_matches_upstream(sim)
    assert_derived_exact()


class _GlitchingHistory(_TwoPageHistory):
    """Two pages of history; the second answers 200 with a body that is no page while `glitch` is set."""

    glitch = True
    base_date = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)

    def page_body(self, page: int) -> dict[str, Any]:
        if page == 1 and type(self).glitch:
            return {"message": "Internal server error"}
        records = self.records(page, webhookUrl="https://hooks.example.com/g", streamId="g", tag="g")
        return {"result": records, "total": 4, **({"cursor": "page-2"} if page == 0 else {})}


@pytest.mark.django_db
def test_a_200_that_is_no_page_does_not_end_the_walk_or_mark_history_synced(settings: Any) -> None:
    settings.UPSTREAM_MAX_RETRIES = 1
    _GlitchingHistory.glitch = True
    with _source_served_by(_GlitchingHistory, "glitch") as source:
        with pytest.raises(BadResponse):
            poll_head(source)
        source.refresh_from_db()
        assert source.synced_through is None and source.last_error_kind == "bad_response"
        assert not HistoryWalk.objects.get(source=source).finished

        _GlitchingHistory.glitch = False
        assert poll_head(source).complete

    assert Delivery.objects.filter(source=source).count() == 4


def _walk_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("walk-")]


@pytest.mark.django_db
def test_the_next_page_is_read_while_this_one_is_stored_one_page_ahead_at_most_and_stored_in_order(
    sim: Any, sim_source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_ids: list[list[uuid.UUID]] = []
    has_next: list[bool] = []
    stored_ids: list[list[uuid.UUID]] = []
    # How many pages ahead of the stored ones each read began (the page being stored is one).
    ahead_at_start: list[int] = []
    read_started = [threading.Event() for _ in range(100)]
    read_while_storing: list[bool] = []
    original_read, original_store = walks._read_page, walks.store_batch

    def read(client: Any, cursor: str) -> Any:
        ahead_at_start.append(len(read_ids) - len(stored_ids))
        read_started[len(read_ids)].set()
        page, batch = original_read(client, cursor)
        read_ids.append([p.id for p in batch.records])
        has_next.append(page.cursor is not None)
        return page, batch

    def store(source: Source, batch: Any) -> Any:
        number = len(stored_ids)
        # The next page's read begins while this one is being stored (the last page has no next one).
        read_while_storing.append(has_next[number] and read_started[number + 1].wait(timeout=10))
        result = original_store(source, batch)
        stored_ids.append([p.id for p in batch.records])
        return result

    monkeypatch.setattr(walks, "_read_page", read)
    monkeypatch.setattr(walks, "store_batch", store)

    result = poll_head(sim_source)

    pages = len(stored_ids)
    assert result.complete and pages == result.pages >= 4
    assert stored_ids == read_ids
    assert read_while_storing == [True] * (pages - 1) + [False]
    # Read at most one page ahead: a page's read began only once the page two before it was stored.
    assert max(ahead_at_start) == 1
    assert not _walk_threads()
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db
def test_pages_are_parsed_and_stored_with_rarer_young_collections_and_the_threshold_is_put_back(
    sim: Any, sim_source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from dashboard.heap import WALK_GEN0_THRESHOLD

    before = gc.get_threshold()
    assert before[0] != WALK_GEN0_THRESHOLD
    during: list[int] = []
    original_read, original_store = walks._read_page, walks.store_batch
    monkeypatch.setattr(walks, "_read_page", lambda client, cursor: (during.append(gc.get_threshold()[0]),
                                                                      original_read(client, cursor))[1])
    monkeypatch.setattr(walks, "store_batch", lambda source, batch: (during.append(gc.get_threshold()[0]),
                                                                      original_store(source, batch))[1])

    result = poll_head(sim_source)

    assert result.complete and len(during) == 2 * result.pages >= 8
    assert set(during) == {WALK_GEN0_THRESHOLD}
    assert gc.get_threshold() == before
    assert_matches_upstream(sim)


@pytest.mark.django_db
def test_a_parse_error_on_page_n_stops_the_walk_with_that_error_leaving_the_pages_before_stored(
    sim: Any, sim_source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    cursors: list[str | None] = []
    original_fetch, original_parse = walks.fetch_history_page, ingest.parse_records
    error = RuntimeError("the parser broke on page 3")

    def fetch(client: Any, *, limit: int, cursor: str | None) -> Any:
        cursors.append(cursor)
        return original_fetch(client, limit=limit, cursor=cursor)

    def parse(records: Any, rejected: list[str]) -> Any:
        if len(cursors) == 3:
            raise error
        return original_parse(records, rejected)

    monkeypatch.setattr(walks, "fetch_history_page", fetch)
    monkeypatch.setattr(ingest, "parse_records", parse)
    with pytest.raises(RuntimeError) as raised:
        poll_head(sim_source)

    # The parser's own error, raised once the two pages before it were stored with their checkpoint.
    assert raised.value is error
    assert len(cursors) == 3
    walk = HistoryWalk.objects.get(source=sim_source, kind="head")
    assert walk.pages == 2 and walk.cursor == cursors[2] and not walk.finished
    assert Delivery.objects.count() == 2 * 100
    sim_source.refresh_from_db()
    assert sim_source.last_error_kind == "internal" and sim_source.synced_through is None
    assert not _walk_threads()

    monkeypatch.setattr(ingest, "parse_records", original_parse)
    cursors.clear()
    assert poll_head(sim_source).complete

    # The next run resumed at page 3 and read no page twice; then a fresh walk read the newest page only.
    pages_total = -(-len(truth(sim)) // 100)
    assert cursors[0] == walk.cursor and cursors[-1] is None and len(cursors) == pages_total - 2 + 1
    assert_matches_upstream(sim)
    assert_derived_exact()


@pytest.mark.django_db
def test_a_storing_error_drops_the_page_read_ahead_and_leaves_no_thread(
    sim: Any, sim_source: Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = sim.world.requests_served
    original = walks.store_batch

    def store(source: Source, batch: Any) -> Any:
        if HistoryWalk.objects.get(source=source).pages == 1:
            deadline = time.monotonic() + 10
            while sim.world.requests_served - requests < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            raise RuntimeError("the database went away")
        return original(source, batch)

    monkeypatch.setattr(walks, "store_batch", store)
    with pytest.raises(RuntimeError, match="went away"):
        poll_head(sim_source)

    # Page 3 was read ahead while page 2 failed; the walk waited for it and dropped it.
    assert sim.world.requests_served - requests == 3
    assert not _walk_threads()
    walk = HistoryWalk.objects.get(source=sim_source, kind="head")
    assert walk.pages == 1 and Delivery.objects.count() == 100


@pytest.mark.django_db
def test_no_page_is_read_past_the_page_budget(sim: Any, sim_source: Source) -> None:
    requests = sim.world.requests_served

    outcome = walk_history(sim_source, WalkKind.HEAD, client=streams_client(sim_source), stop_before=None, max_pages=2)

    assert outcome.pages == 2 and not outcome.complete
    assert sim.world.requests_served - requests == 2


@pytest.mark.django_db
def test_the_last_retry_of_the_published_schedule_is_read_back(make_simulator: Any) -> None:
    """A failing delivery's last attempt comes 45 h 11 min after its first (1 min, 10 min, 1 h, 2 h, 6 h, 12 h,
    24 h): with the default retry window and a revisit every 45 minutes, the revisit reads it back, so the stored
    row ends with the provider's final retry count and status rather than an earlier retry's."""
    from dashboard.deliveries.schedule import ATTEMPT_OFFSETS, MAX_RETRIES

    # The scenario's per-delivery 413s on the NFT sales URL run from S - 5 d to S - 2.5 d: poll in them.
    sim = make_simulator(history_window_days=7)
    began = START - timedelta(days=4, hours=12)
    sim.world.clock.set(began)
    source = source_for(sim)
    poll(source)
    # The deliveries of the last twelve hours still retrying: their last attempts fall from 33 h 11 min to 45 h
    # 11 min on. The clock goes there (what happens before is not looked at) and a revisit runs every 45 minutes.
    last_attempt = timedelta(seconds=ATTEMPT_OFFSETS[-1])
    span = timedelta(hours=12)
    pending = set(Delivery.objects.filter(date__gt=began - span, retries__lt=MAX_RETRIES)
                  .exclude(error_message="").values_list("id", flat=True))
    assert pending
    step = timedelta(minutes=45)
    sim.world.clock.set(began + last_attempt - span - step)
    while sim.world.clock.now() < began + last_attempt + step:
        sim.world.clock.advance(step.total_seconds())
        Source.objects.filter(pk=source.pk).update(last_revisit_at=None)
        source.refresh_from_db()
        assert poll(source).revisited

    # Each is stored as the provider shows it at the end of its schedule.
    records = truth(sim)
    ended = {d.id: d for d in Delivery.objects.filter(id__in=pending)}
    assert pending <= set(records)
    assert all(records[i]["tinyPayload"]["retries"] == MAX_RETRIES for i in pending)
    for record_id, row in ended.items():
        record = records[record_id]
        assert (row.retries, row.error_message) == (MAX_RETRIES, record["errorMessage"]), record_id
        assert row.tiny_payload == record["tinyPayload"] and row.payload == record.get("payload")
