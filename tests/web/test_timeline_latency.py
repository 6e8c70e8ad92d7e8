"""The timeline's latency panel: p50/p95/p99 of a slice (by stream, chain, tag or URL) over the window and over
time, unconfirmed and confirmed apart, from the rollups' histograms; the per-chain table; the link to the
slowest deliveries (from the p95, or the slowest bucket's lower bound when lower); the empty state; its queries."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.deliveries.latency import BOUNDS, LAST_BUCKET_END, bucket_of, histogram_of, percentile
from dashboard.deliveries.models import Delivery
from dashboard.sources.models import Source
from dashboard.web import latency_panel
from dashboard.web.latency_panel import SliceLatency, min_latency, slowest_from
from tests.web.conftest import STREAM_A, STREAM_B, URL_A, URL_B, default_payload, record, store

pytestmark = pytest.mark.django_db

POLYGON = "0x89"


def timed(date: datetime, seconds: float, *, confirmed: bool = False, chain: str = "0x1", **fields: Any) -> dict[str, Any]:
    payload = default_payload(100, chain)
    payload["block"]["timestamp"] = str(int(date.timestamp() - seconds))
    return record(date=date, confirmed=confirmed, chain=chain, payload=payload, **fields)


@pytest.fixture
def latencies(plain_source: Source) -> datetime:
    """Two days of deliveries whose stream, chain, tag and URL do not go together, so each slice differs."""
    now = timezone.now().replace(microsecond=0)
    ago = [now - timedelta(hours=h, minutes=10) for h in range(0, 40, 3)]
    store(
        plain_source,
        # Stream A, Ethereum, alpha, URL A: seconds unconfirmed, minutes confirmed.
        *(timed(at, s) for at in ago for s in (1.5, 2.5, 3.5)),
        *(timed(at, 150, confirmed=True) for at in ago[::2]),
        *(timed(at, 550, confirmed=True) for at in ago[1:3]),
        # Stream A on Polygon, still alpha and URL A.
        *(timed(at, s, chain=POLYGON) for at in ago[:6] for s in (6, 9)),
        *(timed(at, 200, confirmed=True, chain=POLYGON) for at in ago[:3]),
        # Stream B, Polygon, beta: URL B mostly, URL A for some.
        *(timed(at, s, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_B) for at in ago for s in (12, 25)),
        *(timed(at, 400, confirmed=True, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_B) for at in ago),
        *(timed(at, 45, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_A) for at in ago[:4]),
        *(timed(at, 1700, confirmed=True, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_B) for at in ago[:2]),
        # A busy hour with one very slow delivery.
        *(timed(now - timedelta(hours=5), 3, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_B) for _ in range(20)),
        timed(now - timedelta(hours=5), 1500, chain=POLYGON, stream_id=STREAM_B, tag="beta", url=URL_B),
    )
    return now


def within_bucket(value: float | None, exact_ms: int) -> bool:
    """Whether an interpolated percentile lies in the bucket holding the exact one, as the histograms promise."""
    i = bucket_of(exact_ms)
    low = 0.0 if i == 0 else float(BOUNDS[i - 1])
    high = float(BOUNDS[i]) if i < len(BOUNDS) else LAST_BUCKET_END
    return value is not None and low <= value <= high


def check_against_rows(panel: SliceLatency, rows: Any, *, exact: bool) -> None:
    for confirmed, shown in ((False, panel.latency.unconfirmed), (True, panel.latency.confirmed)):
        stored = sorted(rows.filter(confirmed=confirmed).values_list("latency_ms", flat=True))
        assert shown.count == len(stored) > 0
        assert sum(shown_buckets(panel, confirmed)) == len(stored)
        histogram = histogram_of(stored)
        for p, value in ((50, shown.p50), (95, shown.p95), (99, shown.p99)):
            if exact:
                # A slice this small is read from its rows: each percentile interpolated between the two nearest
                # latencies (percentile_cont).
                assert value == pytest.approx(linear_percentile(stored, p) / 1000)
                continue
            assert value == pytest.approx(percentile(histogram, p))
            nearest_rank = stored[max(math.ceil(p / 100 * len(stored)) - 1, 0)]
            assert within_bucket(value, nearest_rank), (confirmed, p, value, nearest_rank)


@pytest.fixture
def histograms_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every slice read from the rollups' histograms, however small (as slices above EXACT_UP_TO are)."""
    monkeypatch.setattr(latency_panel, "EXACT_UP_TO", 0)


def shown_buckets(panel: SliceLatency, confirmed: bool) -> tuple[int, ...]:
    return panel.latency.confirmed_buckets if confirmed else panel.latency.unconfirmed_buckets


def linear_percentile(values: list[int], p: float) -> float:
    rank = (len(values) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


@pytest.mark.parametrize(
    ("query", "slice_filter"),
    [
        (f"chain={POLYGON}", {"chain_id": POLYGON}),
        ("chain=polygon", {"chain_id": POLYGON}),
        ("tag=beta", {"tag": "beta"}),
        (f"url={URL_B}", {"webhook_url": URL_B}),
        (f"url={URL_A}&chain={POLYGON}", {"webhook_url": URL_A, "chain_id": POLYGON}),
        (f"stream={STREAM_A}", {"stream_id": STREAM_A}),
    ],
)
@pytest.mark.parametrize("window", ["range=24h", "range=7d"])
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "histograms"])
def test_the_panel_gives_the_percentiles_of_the_slices_stored_rows(
    latencies: datetime, logged_in_client: Client, query: str, slice_filter: dict[str, str], window: str,
    exact: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not exact:
        monkeypatch.setattr(latency_panel, "EXACT_UP_TO", 0)
    response = logged_in_client.get(f"/timeline/?{query}&{window}")
    assert response.status_code == 200
    panel = response.context["latency"]
    rows = Delivery.objects.filter(latency_ms__isnull=False, **slice_filter)
    if window == "range=24h":
        # The read covers the rollup hours from the one holding the window's start.
        rows = rows.filter(date__gte=(panel.window.start).replace(minute=0, second=0, microsecond=0))
    check_against_rows(panel, rows, exact=exact)
    # Over time: the buckets' histograms add up to the window's (no second read), hours for a day, periods for 7.
    assert panel.step == (timedelta(hours=6) if window == "range=7d" else timedelta(hours=1))
    assert sum(t.unconfirmed.count for _bucket, t in panel.over_time) == panel.latency.unconfirmed.count
    html = response.content.decode()
    assert 'id="timeline-latency"' in html and "slowest deliveries" in html
    assert [c.label for c in response.context["latency_charts"]] == ["Unconfirmed", "Confirmed"]


def test_the_chart_draws_three_lines_and_links_each_bucket_to_its_slowest(
    latencies: datetime, logged_in_client: Client
) -> None:
    response = logged_in_client.get("/timeline/?tag=beta&range=24h")
    unconfirmed = response.context["latency_charts"][0]
    chart = unconfirmed.chart
    assert [line.name for line in chart.lines] == ["p50", "p95", "p99"]
    assert all(line.segments or line.dots for line in chart.lines)
    linked = [slot for slot in chart.slots if slot.href]
    assert linked and all("tag=beta" in slot.href and "confirmed=false" in slot.href for slot in linked)
    # The busy hour's link lists its deliveries at or above its own p95: the 25-minute one.
    panel = response.context["latency"]
    first = panel.over_time[0][0]
    bucket, busy = max(panel.over_time, key=lambda item: item[1].unconfirmed.count)
    slow = chart.slots[(bucket - first) // panel.step]
    listed = logged_in_client.get(slow.href).context["deliveries"]
    assert busy.unconfirmed.count == 21 and [d.latency_ms for d in listed] == [1_500_000]
    html = response.content.decode()
    assert 'class="lat lat-p95"' in html and "Latency: block to first attempt" in html


def test_a_table_per_chain_when_no_chain_is_chosen(latencies: datetime, logged_in_client: Client) -> None:
    response = logged_in_client.get("/timeline/?range=7d")
    panel = response.context["latency"]
    assert [chain for chain, _l in panel.by] == ["0x1", POLYGON]
    for chain, latency in panel.by:
        check_latency = Delivery.objects.filter(latency_ms__isnull=False, chain_id=chain, confirmed=False)
        assert latency.unconfirmed.count == check_latency.count()
    assert 'id="latency-by-chain"' in response.content.decode()
    # Sliced by a chain, the table would repeat the panel: none.
    assert logged_in_client.get(f"/timeline/?range=7d&chain={POLYGON}").context["latency"].by == []


@pytest.mark.usefixtures("histograms_only")
@pytest.mark.parametrize("query", [f"chain={POLYGON}", "tag=beta", f"url={URL_B}", f"url={URL_A}"])
@pytest.mark.parametrize("confirmed", [False, True])
def test_the_slowest_deliveries_link_lists_exactly_those_at_or_above_its_start(
    latencies: datetime, logged_in_client: Client, query: str, confirmed: bool
) -> None:
    panel = logged_in_client.get(f"/timeline/?{query}&range=7d").context["latency"]
    link = panel.slowest_confirmed if confirmed else panel.slowest_unconfirmed
    latency = panel.latency.confirmed if confirmed else panel.latency.unconfirmed
    params = parse_qs(link)
    assert params["range"] == ["7d"] and params["confirmed"] == ["true" if confirmed else "false"]
    # The link starts at the window's p95, or lower where the p95 lies in the slowest non-empty bucket
    # (latency_panel.slowest_from), never above it.
    start = float(params["min_latency"][0])
    histogram = latency_histogram(panel, confirmed)
    assert params["min_latency"] == [min_latency(slowest_from(histogram))] and start <= latency.p95 + 0.001
    response = logged_in_client.get(f"/deliveries/?{link}")
    assert response.status_code == 200
    listed = {d.pk for d in response.context["deliveries"]}
    name, value = query.split("=", 1)
    column = {"chain": "chain_id", "tag": "tag", "url": "webhook_url"}[name]
    rows = Delivery.objects.filter(**{column: value}, confirmed=confirmed, latency_ms__isnull=False)
    assert listed == {d.pk for d in rows if d.latency_ms >= start * 1000}
    assert listed >= {d.pk for d in rows if d.latency_ms >= latency.p95 * 1000} and listed


@pytest.mark.usefixtures("histograms_only")
def test_a_p95_below_the_slowest_bucket_is_exactly_the_links_start(
    latencies: datetime, logged_in_client: Client
) -> None:
    # Beta's unconfirmed p95 lies in the 30-60 s bucket, below its 25-minute delivery's: the link starts at the p95
    # itself, to the millisecond, and lists exactly the deliveries at or above it.
    panel = logged_in_client.get("/timeline/?tag=beta&range=7d").context["latency"]
    assert not panel.exact
    p95 = panel.latency.unconfirmed.p95
    assert 30 < p95 < 60
    assert parse_qs(panel.slowest_unconfirmed)["min_latency"] == [min_latency(p95)]
    listed = logged_in_client.get(f"/deliveries/?{panel.slowest_unconfirmed}").context["deliveries"]
    rows = Delivery.objects.filter(tag="beta", confirmed=False, latency_ms__isnull=False)
    assert {d.pk for d in listed} == {d.pk for d in rows if d.latency_ms >= p95 * 1000}
    assert [d.latency_ms for d in listed] == [1_500_000]


def latency_histogram(panel: SliceLatency, confirmed: bool) -> tuple[int, ...]:
    return panel.latency.confirmed_buckets if confirmed else panel.latency.unconfirmed_buckets


@pytest.mark.parametrize("query", [f"chain={POLYGON}", "tag=beta", f"url={URL_B}"])
@pytest.mark.parametrize("confirmed", [False, True])
def test_a_small_slices_link_starts_at_its_exact_p95(
    latencies: datetime, logged_in_client: Client, query: str, confirmed: bool
) -> None:
    response = logged_in_client.get(f"/timeline/?{query}&range=7d")
    panel = response.context["latency"]
    assert panel.exact and "read from the window's deliveries themselves" in response.content.decode()
    link = panel.slowest_confirmed if confirmed else panel.slowest_unconfirmed
    p95 = (panel.latency.confirmed if confirmed else panel.latency.unconfirmed).p95
    assert parse_qs(link)["min_latency"] == [min_latency(p95)]
    listed = {d.pk for d in logged_in_client.get(f"/deliveries/?{link}").context["deliveries"]}
    name, value = query.split("=", 1)
    column = {"chain": "chain_id", "tag": "tag", "url": "webhook_url"}[name]
    rows = Delivery.objects.filter(**{column: value}, confirmed=confirmed, latency_ms__isnull=False)
    # The exact p95 lies at or below the slowest delivery: the list is never empty.
    assert listed == {d.pk for d in rows if d.latency_ms >= p95 * 1000} and listed


def test_a_custom_window_links_its_own_start_and_end(latencies: datetime, logged_in_client: Client) -> None:
    start = (latencies - timedelta(hours=20)).strftime("%Y-%m-%dT%H:%M")
    end = (latencies - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    panel = logged_in_client.get(f"/timeline/?tag=beta&start={start}&end={end}").context["latency"]
    params = parse_qs(panel.slowest_unconfirmed)
    assert params["range"] == ["custom"] and params["start"] == [f"{start}:00"] and params["end"] == [f"{end}:00"]
    listed = logged_in_client.get(f"/deliveries/?{panel.slowest_unconfirmed}").context["deliveries"]
    start_ms = float(parse_qs(panel.slowest_unconfirmed)["min_latency"][0]) * 1000
    assert listed and all(d.tag == "beta" and d.latency_ms >= start_ms for d in listed)


def test_no_latency_in_the_window_says_so(plain_source: Source, logged_in_client: Client) -> None:
    # Without a block timestamp of its time (the default payload's is years old) a delivery has no latency.
    store(plain_source, record(date=timezone.now() - timedelta(minutes=20)))
    response = logged_in_client.get("/timeline/?range=24h")
    assert response.context["latency"].empty and response.context["latency_charts"] == []
    html = response.content.decode()
    assert "No latency recorded in this window." in html and 'id="timeline-latency"' not in html


def test_an_event_slice_says_latency_is_not_kept_per_event(
    latencies: datetime, logged_in_client: Client
) -> None:
    response = logged_in_client.get("/timeline/?range=24h&event=Transfer")
    assert response.context["latency"] is None
    assert "Latency is not kept per decoded event" in response.content.decode()


@pytest.mark.parametrize(("query", "queries"), [("range=24h", 12), ("range=7d", 13)])
def test_the_panel_costs_one_grouped_read(
    latencies: datetime, logged_in_client: Client, django_assert_num_queries: Any, query: str, queries: int
) -> None:
    # The timeline's 9 (tests/web/test_timeline.py) + the latency panel's one grouped read of the rollups'
    # histograms per time bucket and chain (deliveries.rollup_window.latency_bucketed): the hourly rollups for
    # a day, the edge hours and the stream period rollups' whole periods for 7 days
    # + this slice is small (latency.EXACT_UP_TO): its percentiles read exactly from its rows, for the window and per
    # chain (two grouped reads of the slice's rows).
    with django_assert_num_queries(queries):
        logged_in_client.get(f"/timeline/?{query}&url={URL_B}")


def test_the_stream_pages_panel_reads_the_same(latencies: datetime, logged_in_client: Client) -> None:
    stream = logged_in_client.get(f"/streams/{STREAM_B}/?range=7d").context["latency"]
    timeline = logged_in_client.get(f"/timeline/?stream={STREAM_B}&range=7d").context["latency"]
    assert stream.latency == timeline.latency
    assert stream.slowest_unconfirmed == timeline.slowest_unconfirmed


def test_the_streams_pages_latency_column_is_exact_for_small_streams(
    latencies: datetime, logged_in_client: Client
) -> None:
    entries = {e["stats"].key: e for e in logged_in_client.get("/streams/").context["entries"]}
    since = (timezone.now() - timedelta(hours=24)).replace(minute=0, second=0, microsecond=0)
    for stream_id, entry in entries.items():
        stored = sorted(Delivery.objects.filter(stream_id=stream_id, confirmed=False, latency_ms__isnull=False,
                                                date__gte=since).values_list("latency_ms", flat=True))
        if not stored:
            continue
        shown = entry["latency"].unconfirmed
        assert shown.count == len(stored)
        assert shown.p95 == pytest.approx(linear_percentile(stored, 95) / 1000)
