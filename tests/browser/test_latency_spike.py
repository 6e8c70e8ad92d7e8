"""A latency spike, seen in the browser: the scenario's slow period (the provider lags on nft-sales' deliveries due
from S+1 min to S+9 min, sending them minutes late). The stream page's latency panel shows it in its p99 and its
slowest-deliveries link lists the late deliveries; the stream's timeline (its "Timeline" button), whose latency
chart draws p50, p95 and p99 per hour, shows it in the hours those late deliveries went out and in no other, and
the spike's slot links to its own late deliveries.

Read from the pages as drawn (the panel's table, each chart slot's title: its hour, its percentiles, its count; the
deliveries list's rows) and held to the simulator's truth (each delivery's due moment and first attempt), never to
the database.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard.deliveries.models import Stream
from dashboard.simulator import truth
from tests.actions.completeness_world import World
from tests.browser.fixtures import screenshot
from tests.factories import source_for

pytestmark = pytest.mark.browser

SALES = "nft-sales"
# A delivery of the slow period goes out at least a minute late; any other within seconds.
SLOW = 60.0
SLOT = re.compile(
    r"^(?P<start>\d{4}-\d\d-\d\d \d\d:\d\d)–\d\d:\d\d UTC · p50 (?P<p50>[\d.]+) s · p95 (?P<p95>[\d.]+) s · "
    r"p99 (?P<p99>[\d.]+) s · (?P<count>[\d,]+) deliver"
)


def chart_slots(page: Any, label: str) -> dict[datetime, dict[str, Any]]:
    """The slots of the page's latency chart `label` ("Unconfirmed", "Confirmed") that hold deliveries, read
    from each slot's title and link: its hour -> p50, p95, p99, count and href."""
    chart = page.locator(f"svg.latency-chart[aria-label^='{label} latency over time']")
    slots = {}
    for link in chart.locator("a").all():
        title = link.locator("title").text_content() or ""
        found = SLOT.match(title)
        assert found, title
        start = datetime.strptime(found["start"], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
        slots[start] = {
            "p50": float(found["p50"]), "p95": float(found["p95"]), "p99": float(found["p99"]),
            "count": int(found["count"].replace(",", "")), "href": link.get_attribute("href"),
        }
    return slots


def listed_ids(page: Any) -> set[str]:
    rows = page.locator("#deliveries-table tbody tr[data-href]")
    return {str(href).strip("/").split("/")[-1] for href in (r.get_attribute("data-href") for r in rows.all())}


def assert_lists_the_slowest(page: Any, candidates: dict[str, Any], late: dict[str, Any]) -> None:
    """The deliveries list the page shows holds late deliveries only, and every candidate at or above the list's
    `min_latency` (the truth's latency may differ from the stored one by the block timestamp's fraction of a
    second)."""
    threshold = float(parse_qs(urlsplit(page.url).query)["min_latency"][0])
    page.locator("#deliveries-table").wait_for()
    shown = listed_ids(page)
    assert shown, f"no delivery listed at or above {threshold} s"
    assert shown <= set(late)
    assert {i for i, d in candidates.items() if d.latency >= threshold + 1} <= shown
    assert shown <= {i for i, d in candidates.items() if d.latency >= threshold - 1}


def hour_of(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC).replace(minute=0, second=0, microsecond=0)


def test_the_slow_period_shows_on_the_streams_latency_in_its_hours_and_links_to_the_late_deliveries(
    page: Any, make_simulator: Callable[..., Any], no_stale_locks: None
) -> None:
    # The scenario started twenty minutes ago: its slow period is over and every late delivery went out.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
    sim = make_simulator(start=start, history_window_days=1)
    world = World(sim, source_for(sim))
    world.catch_up()
    world.poll()
    world.sync()
    sales = Stream.objects.get(source=world.source, tag=SALES)
    sim_sales = sim.world.streams.stream(sales.stream_id)
    [(slow_stream, slow_from, slow_to)] = truth.slow_periods(sim.world)
    assert slow_stream.id == sales.stream_id

    # The truth: every first attempt of the stream in the provider's history (its day), with its lateness.
    now = sim.world.clock.timestamp()
    kept_from = now - sim.world.history.window_seconds
    recorded = [
        d for b in truth.matching_blocks(sim.world, kept_from - 3600, now, stream=sim_sales)
        for d in b.deliveries if d.fate == truth.RECORDED and d.date >= kept_from
    ]
    late = {d.id: d for d in recorded if d.latency > SLOW}
    # Late because their first attempt (1-5 s after they were due) fell in the slow period.
    assert len(late) >= 5 and all(slow_from - 5 <= d.due < slow_to for d in late.values())
    assert all(d.latency < 10 for d in recorded if d.id not in late)
    recorded_unconfirmed = {d.id: d for d in recorded if not d.confirmed}
    late_unconfirmed = {i: d for i, d in recorded_unconfirmed.items() if i in late}
    spike_hours = {hour_of(d.date) for d in late_unconfirmed.values()}

    # The stream's page over 24 hours: its latency panel's unconfirmed p99 is the spike's.
    page.goto(f"/streams/{sales.stream_id}/?range=24h")
    unconfirmed = page.locator("#stream-latency tbody tr", has_text="Unconfirmed")
    p99 = float(unconfirmed.locator("td.num").nth(3).inner_text().removesuffix(" s"))
    assert p99 > SLOW
    screenshot(page, "latency-1-stream-panel")
    # Its slowest-deliveries link lists late deliveries, every one of them from where the link starts.
    unconfirmed.get_by_role("link", name="slowest deliveries →").click()
    page.wait_for_url("**/deliveries/?**")
    assert_lists_the_slowest(page, {i: d for i, d in recorded_unconfirmed.items()}, late_unconfirmed)
    screenshot(page, "latency-2-slowest-deliveries")

    # The stream's timeline (a click from its page): p50, p95 and p99 per hour, the spike in its hours only.
    page.goto(f"/streams/{sales.stream_id}/")
    page.locator("main").locator(f"a.button[href='/timeline/?stream={sales.stream_id}']").click()
    page.wait_for_url(f"**/timeline/?stream={sales.stream_id}")
    slots = chart_slots(page, "Unconfirmed")
    screenshot(page, "latency-3-timeline-chart")
    assert slots, "the chart has no slot with deliveries"
    assert {hour for hour, s in slots.items() if s["p99"] > SLOW} == spike_hours
    for hour, slot in slots.items():
        if hour not in spike_hours:
            assert slot["p99"] < 10, (hour, slot)
        # Each slot counts the unconfirmed first attempts the simulator made in that hour.
        assert slot["count"] == sum(1 for d in recorded_unconfirmed.values() if hour_of(d.date) == hour), hour

    # The spike's slot links to its own slowest deliveries.
    peak = max(spike_hours, key=lambda h: slots[h]["p95"])
    page.locator(f"svg.latency-chart a[href='{slots[peak]['href']}']").first.click()
    page.wait_for_url("**/deliveries/?**")
    in_peak = {i: d for i, d in recorded_unconfirmed.items() if hour_of(d.date) == peak}
    assert_lists_the_slowest(page, in_peak, late_unconfirmed)
    screenshot(page, "latency-4-slot-slowest-deliveries")
