"""The numbers behind the pages answer what the pages show for the same filters: the timeline's buckets, the latency
panel, the retry statistics, a stream's objectives, its outage windows and audits, a window's scans, missing blocks
and recovery, and the audit of actions at the provider."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
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
from tests.api.conftest import STREAM, bearer, token_for
from tests.conftest import make_user
from tests.factories import history_record, make_source, store

pytestmark = pytest.mark.django_db

OTHER = "1e1e1e1e-0000-4000-8000-000000000001"
LINK = "%Y-%m-%dT%H:%M:%S"


def _payload(at: datetime, seconds: float, chain: str, block: int) -> dict[str, Any]:
    return {
        "block": {"number": str(block), "hash": "0x" + "12" * 32, "timestamp": str(int(at.timestamp() - seconds))},
        "chainId": chain,
        "logs": [],
    }


@pytest.fixture
def now(db: None) -> datetime:
    """Two days of deliveries of two streams on two chains, some failing or retried, each with a latency."""
    source = make_source()
    now = timezone.now().replace(microsecond=0)
    records = []
    for n in range(64):
        at = now - timedelta(minutes=45 * n + 3)
        chain = "0x89" if n % 3 == 0 else "0x1"
        confirmed = n % 4 == 0
        seconds = (1 + n % 7) * (40 if confirmed else 1)
        records.append(history_record(
            date=at, stream_id=STREAM if n % 2 else OTHER, tag="orders" if n % 2 else "swaps", chain=chain,
            error="HTTP 500 from receiver" if n % 5 == 0 else "", retries=n % 4, confirmed=confirmed,
            block=19_000_000 + n, payload=_payload(at, seconds, chain, 19_000_000 + n),
        ))
    store(source, *records)
    return now


@pytest.fixture
def client(db: None) -> Client:
    return bearer(token_for(make_user("ops", staff=True), ["read"]))


@pytest.fixture
def page(db: None) -> Client:
    viewer = Client()
    viewer.force_login(make_user("root", staff=True))
    return viewer


def _get(client: Client, url: str) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _custom(now: datetime, hours_back: float, hours: float) -> str:
    end = now - timedelta(hours=hours_back)
    return f"range=custom&start={(end - timedelta(hours=hours)):{LINK}}&end={end:{LINK}}"


def _queries(now: datetime) -> list[str]:
    return [
        "range=7d", f"stream={STREAM}&range=30d", "chain=polygon&range=7d", "tag=swaps&range=7d",
        _custom(now, 1, 3), _custom(now, 2, 30) + "&tz=Europe/Berlin", _custom(now, 0.5, 40) + "&chain=eth",
        "url=https://hooks.example.com/moralis&range=7d",
    ]


def test_the_timeline_matches_the_page(now: datetime, client: Client, page: Client) -> None:
    for query in [*_queries(now), "range=7d&event=Transfer"]:
        shown = page.get(f"/timeline/?{query}")
        assert shown.status_code == 200, query
        timeline = shown.context["timeline"]
        got = _get(client, f"/api/v1/timeline?{query}")
        assert [(_at(b["start"]), _at(b["end"]), b["delivered"], b["failed"]) for b in got["buckets"]] == [
            (b.start, b.end, b.delivered, b.failed) for b in timeline.buckets
        ], query
        assert got["step_seconds"] == timeline.step.total_seconds()
        assert (got["delivered"], got["failed"]) == (timeline.chart.delivered, timeline.chart.failed)
        assert got["success_rate"] == shown.context["success_rate"]
        assert got["zone"] == timeline.zone_name and got["from_rollups"] == timeline.from_rollups
    berlin = _get(client, f"/api/v1/timeline?{_custom(now, 2, 30)}&tz=Europe/Berlin")
    assert berlin["zone"] == "Europe/Berlin" and berlin["buckets"][0]["start"].endswith(("+01:00", "+02:00"))
    everything = _get(client, "/api/v1/timeline?range=7d")
    assert everything["delivered"] + everything["failed"] == 64


def _pair(item: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((item[k]["count"], item[k]["p50"], item[k]["p95"], item[k]["p99"]) for k in ("unconfirmed", "confirmed"))


def _latencies(latencies: Any) -> tuple[Any, ...]:
    return tuple((p.count, p.p50, p.p95, p.p99) for p in (latencies.unconfirmed, latencies.confirmed))


def test_latency_matches_the_timelines_panel(now: datetime, client: Client, page: Client) -> None:
    for query in _queries(now):
        panel = page.get(f"/timeline/?{query}").context["latency"]
        got = _get(client, f"/api/v1/latency?{query}")
        assert _pair(got) == _latencies(panel.latency), query
        assert [(_at(t["start"]), _pair(t)) for t in got["over_time"]] == [
            (start, _latencies(parts)) for start, parts in panel.over_time
        ], query
        assert [(c["chain_id"], _pair(c)) for c in got["by_chain"]] == [
            (chain, _latencies(parts)) for chain, parts in panel.by
        ], query
        assert got["step_seconds"] == panel.step_seconds and got["exact"] == panel.exact
        assert (got["slowest_unconfirmed"], got["slowest_confirmed"]) == (
            panel.slowest_unconfirmed, panel.slowest_confirmed)
    whole = _get(client, "/api/v1/latency?range=7d")
    assert whole["unconfirmed"]["count"] + whole["confirmed"]["count"] == 64
    assert [c["chain_id"] for c in whole["by_chain"]] == ["0x1", "0x89"]
    assert _get(client, "/api/v1/latency?range=7d&chain=eth")["by_chain"] == []


def test_latency_matches_the_stream_pages_panel(now: datetime, client: Client, page: Client) -> None:
    panel = page.get(f"/streams/{STREAM}/?range=30d").context["latency"]
    got = _get(client, f"/api/v1/latency?stream={STREAM}&range=30d")
    assert _pair(got) == _latencies(panel.latency) and got["exact"] == panel.exact


def _retry_row(row: Any) -> tuple[Any, ...]:
    return (row.key, row.label, row.total, row.delivered, row.retrying, row.failed, row.retried, row.distribution,
            row.delivered_after, row.first_try_share, row.eventually_share, row.median_time_to_success)


def _retry_item(item: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(item[k] for k in ("key", "label", "total", "delivered", "retrying", "failed", "retried",
                                   "by_retries", "delivered_after", "first_try_percent", "eventually_percent",
                                   "median_seconds_to_success"))


def _walk(client: Client, url: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items: list[dict[str, Any]] = []
    body: dict[str, Any] = {}
    while url:
        body = _get(client, url)
        items.extend(body["items"])
        url = body["next"]
        assert len(items) < 500
    return items, body


def test_retry_statistics_match_the_page(now: datetime, client: Client, page: Client) -> None:
    for query in ["", "by=tag", "range=24h", f"stream={STREAM}", "tag=swaps&range=30d", _custom(now, 1, 20)]:
        shown = page.get(f"/retries/?{query}")
        assert shown.status_code == 200, query
        items, last = _walk(client, f"/api/v1/retries?{query}&limit=1".replace("?&", "?"))
        assert [_retry_item(i) for i in items] == [_retry_row(r) for r in shown.context["rows"]], query
        assert _retry_item(last["overall"]) == _retry_row(shown.context["overall"]), query
        assert last["by"] == shown.context["by"]
    overall = _get(client, "/api/v1/retries")["overall"]
    assert overall["total"] == 64 and sum(overall["by_retries"]) == 64
    assert overall["failed"] + overall["retrying"] == sum(1 for n in range(64) if n % 5 == 0)


def _measure(m: Any) -> tuple[Any, ...]:
    return (m.target, m.total, m.bad, m.good_percent, m.budget_left, m.burn_rate)


def _measure_out(m: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(m[k] for k in ("target", "total", "bad", "good_percent", "budget_left", "burn_rate"))


def test_objectives_match_the_stream_page(now: datetime, client: Client, page: Client) -> None:
    panel = page.get(f"/streams/{STREAM}/").context["objectives"]
    got = _get(client, f"/api/v1/streams/{STREAM}/objectives")
    objective = got["objective"]
    assert (objective["delivery"], objective["delivery_target"], objective["latency_seconds"],
            objective["latency_target"], objective["own"]) == (
        panel.objective.delivery, panel.objective.delivery_target, panel.objective.latency_seconds,
        panel.objective.latency_target, panel.objective.own)
    budget = got["budget"]
    assert budget is not None and panel.budget is not None
    assert _measure_out(budget["delivery"]) == _measure(panel.budget.delivery)
    assert _measure_out(budget["latency"]) == _measure(panel.budget.latency)
    assert budget["least_left"] == panel.budget.least_left and budget["left_out_hours"] == panel.budget.left_out
    assert [b["name"] for b in got["burns"]] == ["fast", "slow"]
    for burn, reading in zip(got["burns"], panel.burns, strict=True):
        assert (burn["holds"], burn["factor"], burn["long_seconds"]) == (
            reading.holds, reading.burn.factor, reading.burn.long.total_seconds())
        assert [_measure_out(m) for m in burn["delivery"]] == [_measure(m) for m in reading.delivery]
        assert [_measure_out(m) for m in burn["latency"]] == [_measure(m) for m in reading.latency]
    assert client.get("/api/v1/streams/unknown/objectives").status_code == 404


def _scanned(stream: Stream, kind: str, start: datetime, blocks: dict[int, bool]) -> OutageWindow:
    window = OutageWindow.objects.create(stream=stream, kind=kind, label=kind, start=start,
                                         end=start + timedelta(hours=1))
    scan = BlockScan.objects.create(window=window, source=stream.source, stream_id=stream.stream_id,
                                    state=ScanState.DONE, requested_by_name="ops", planned=len(blocks),
                                    previewed=len(blocks), matched=sum(blocks.values()))
    for number, matched in blocks.items():
        PreviewedBlock.objects.create(scan=scan, chain_id="0x1", block_number=number, matched=matched,
                                      records=2 if matched else 0, previewed_at=start + timedelta(hours=2))
    return window


def test_windows_audits_and_a_windows_missing_blocks_match_the_pages(
    now: datetime, client: Client, page: Client
) -> None:
    stream = Stream.objects.get(stream_id=STREAM)
    # Block 19000001 has a delivery (n = 1): previewed and matched, it is not missing.
    found = _scanned(stream, WindowKind.MARKED, now - timedelta(hours=5), {19_000_001: True, 7: True, 8: False, 9: True})
    for n in range(3):
        OutageWindow.objects.create(stream=stream, kind=WindowKind.PROVIDER_STATUS, label="error",
                                    start=now - timedelta(days=n + 1), end=now - timedelta(days=n + 1, hours=-1))
        _scanned(stream, WindowKind.AUDIT, now - timedelta(days=n + 2), {100 + n: True})
    section = page.get(f"/streams/{STREAM}/")
    outages, last = _walk(client, f"/api/v1/streams/{STREAM}/windows?limit=2")
    assert [w["id"] for w in outages] == [w.pk for w in section.context["windows"]]
    assert last["audit_skipped"] == section.context["audit_skipped"]
    audits, _ = _walk(client, f"/api/v1/streams/{STREAM}/windows?kind=audit&limit=2")
    assert [w["id"] for w in audits] == [w.pk for w in section.context["audits"]]
    assert [w["kind"] for w in audits] == ["audit"] * 3 and all(w["stream_id"] == STREAM for w in audits)
    assert outages[0]["latest_scan"]["state"] == "done" and outages[0]["latest_scan"]["percent"] == 100

    shown = page.get(f"/windows/{found.pk}/").context
    got = _get(client, f"/api/v1/windows/{found.pk}")
    assert got["missing_count"] == shown["missing_count"] == 2
    assert [(m["chain_id"], m["block_number"], m["records"]) for m in got["missing"]] == [
        (m.chain_id, m.block_number, m.records) for m in shown["missing"]] == [("0x1", 7, 2), ("0x1", 9, 2)]
    assert [s["id"] for s in got["scans"]] == [s.pk for s in shown["scans"]]
    assert got["recovery"] is None and shown["recovery"] is None
    assert got["planned_ranges"] == [] and got["placing_error"] == shown["placing_error"]
    paged, last = _walk(client, f"/api/v1/windows/{found.pk}/missing-blocks?limit=1")
    assert [(m["chain_id"], m["block_number"]) for m in paged] == [("0x1", 7), ("0x1", 9)]
    assert last["count"] == 2 and last["scan_id"] == shown["scan"].pk
    assert client.get(f"/api/v1/windows/{found.pk}/missing-blocks?cursor=bm9wZQ").status_code == 400
    assert client.get("/api/v1/windows/999999").status_code == 404
    assert client.get(f"/api/v1/streams/{STREAM}/windows?kind=maintenance").status_code == 400
    assert client.get("/api/v1/streams/unknown/windows").status_code == 404


def test_the_audit_of_actions_matches_the_page(now: datetime, client: Client, page: Client) -> None:
    for n, state in enumerate([ActionState.DONE, ActionState.DRAFT, ActionState.FAILED, ActionState.RUNNING] * 3):
        ProviderAction.objects.create(
            kind=ActionKind.REPLAY, state=state, requested_by_name=f"user{n}", scope=f"Replay {n}",
            stream_id=STREAM if n % 2 else OTHER, created_at=now - timedelta(minutes=n % 5),
        )
    for query in ["", f"stream={STREAM}", f"stream={OTHER}", "stream=nothing"]:
        shown = page.get(f"/actions/?{query}").context["actions"]
        got, _ = _walk(client, f"/api/v1/actions?{query}&limit=2".replace("?&", "?"))
        assert [a["id"] for a in got] == [a.pk for a in shown], query
    assert all(a["state"] != "draft" for a in got)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/api/v1/timeline?range=5y", "Range"),
        ("/api/v1/timeline?tz=Mars/Olympus", "Time zone"),
        ("/api/v1/timeline?range=custom&start=2999-01-01&end=2999-01-02", "after now"),
        ("/api/v1/latency?chain=nochain", "chain"),
        ("/api/v1/retries?by=chain", "Group by"),
        ("/api/v1/retries?cursor=bm9wZQ", "cursor"),
        ("/api/v1/actions?cursor=zzz", "cursor"),
        ("/api/v1/streams/x/windows?limit=0", "limit"),
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(client: Client, url: str, says: str) -> None:
    response = client.get(url)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert says.lower() in (body["detail"] + " ".join(body.get("errors") or [])).lower()


@pytest.mark.parametrize("url", ["/api/v1/latency?event=Transfer", "/api/v1/timeline?limit=5",
                                 "/api/v1/retries?chain=eth", f"/api/v1/streams/{STREAM}/objectives?range=7d"])
def test_an_unknown_parameter_is_refused(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 400 and response.json()["type"].endswith(":unknown-parameter")
