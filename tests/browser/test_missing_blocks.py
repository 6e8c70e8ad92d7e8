"""An outage found, its missing blocks re-sent and verified, walked in the browser against the simulator: its owner
pauses uniswap-v2-swaps during the scenario's swap rush (one block in two matches), so the paused minutes leave a
gap in /history; the stream sync sees it paused and active again, and the stream page lists the outage window.
The user opens it, finds its missing blocks (the confirmation says what it costs), re-sends them (the action's
confirmation says how many and where; a viewer sees the list but may not re-send) and, after the next poll, the
window reads "recovered N of N".

What the page lists is held to the simulator's truth (every block the stream matched while paused, none other),
and the simulator's own request log and re-send ledger show each block previewed once and re-sent once. Celery
eager, so a confirmed scan or re-send runs as in a worker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from dashboard.accounts.roles import STAFF, assign_role, sync_roles
from dashboard.celery import app as celery_app
from dashboard.deliveries.models import OutageWindow
from dashboard.simulator import catalog, truth
from tests.actions.completeness_world import World, counting_previews
from tests.browser.fixtures import context_for, screenshot
from tests.conftest import SIMULATOR_KEY, make_user
from tests.factories import source_for

pytestmark = pytest.mark.browser

SWAPS = "uniswap-v2-swaps"
# Longer than Ethereum's finality: the blocks mined in its first minutes lose both deliveries.
PAUSED_FOR = timedelta(minutes=10)


@pytest.fixture
def eager() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


@pytest.fixture
def operator(transactional_db: None) -> User:
    """A user in the Staff role: may spend the preview budget and act at the provider."""
    sync_roles()
    user = make_user("operator", role=None)
    assign_role(user, STAFF)
    return user


@pytest.fixture
def operator_page(browser: Any, live_server: Any, operator: User) -> Iterator[Any]:
    context = context_for(browser, live_server, operator)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def set_status(sim: Any, stream_id: str, status: str) -> None:
    """The stream's owner changes its status at the provider (the contract's status endpoint)."""
    answer = httpx.post(f"{sim.base_url}/streams/evm/{stream_id}/status", headers={"X-API-Key": SIMULATOR_KEY},
                        json={"status": status})
    assert answer.status_code == 200, answer.text


def test_an_outage_found_resent_and_verified_from_the_pages(
    operator_page: Any, viewer_page: Any, make_simulator: Callable[..., Any], no_stale_locks: None, eager: None
) -> None:
    page = operator_page
    # The scenario starts some minutes ago: the outage below is over, and its last blocks final, by the dashboard's
    # now.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=17)
    sim = make_simulator(start=start, history_window_days=1)
    world = World(sim, source_for(sim))
    world.poll()
    world.sync()
    swaps = world.stream(SWAPS)
    # The swaps receiver is healthy throughout (the simulator's control ends the slow receiver the scenario starts at
    # S, which would put the stream in error some minutes in and have the provider refuse the re-sends): the outage
    # here is the pause alone.
    answer = httpx.post(f"{sim.base_url}/simulator/receivers/up", headers={"X-API-Key": SIMULATOR_KEY},
                        json={"streamId": swaps.stream_id})
    assert answer.status_code == 200 and answer.json()["receivers"], answer.text
    sim_swaps = world.sim.world.streams.stream(swaps.stream_id)

    # The outage at the provider: paused for ten minutes of the rush, then active again.
    set_status(world.sim, swaps.stream_id, "paused")
    paused_at = world.sim.world.clock.timestamp()
    world.sim.world.clock.advance(PAUSED_FOR.total_seconds())
    world.sync()
    set_status(world.sim, swaps.stream_id, "active")
    resumed_at = world.sim.world.clock.timestamp()
    world.sim.world.clock.advance(60)
    world.sync()
    # The world goes on to the dashboard's now: the window's last blocks are final and their deliveries polled.
    world.catch_up()
    world.poll()
    window = OutageWindow.objects.get(stream=swaps)
    assert window.end is not None
    # The stream page lists the window; it opens on a click.
    page.goto(f"/streams/{swaps.stream_id}/")
    listed = page.locator("#completeness a.js-window")
    assert listed.inner_text() == "paused"
    listed.click()
    page.wait_for_url(f"**/windows/{window.pk}/")

    # Find missing blocks: the confirmation says what it costs, then the scan runs.
    page.locator("button.js-find-missing").click()
    scope = page.locator("#scan .confirm-scope")
    scope.wait_for()
    cost = re.search(r"Preview (\d+) blocks? \(Ethereum (\d+)–(\d+)\)", scope.inner_text())
    assert cost is not None, scope.inner_text()
    planned, first, last = (int(g) for g in cost.groups())
    assert planned == last - first + 1
    assert f"{planned} previews of the" in scope.inner_text() and "left of today's budget" in scope.inner_text()
    screenshot(page, "missing-blocks-1-scan-confirm")
    with counting_previews() as previews:
        page.locator("button.js-confirm-scan").click()
        page.locator("#scan .js-scan-state", has_text="Done").wait_for()
    assert previews.seen == {("0x1", n): 1 for n in range(first, last + 1)}, "each block previewed once"
    # The simulator's truth: the blocks of the scanned range the stream matched whose every delivery was lost to the
    # pause: each one's first attempt fell due while it was paused (a block mined in the seconds before the pause
    # included: first attempts come 1-5 s after the block, minutes in a slow period).
    matched = truth.matching_blocks(world.sim.world, catalog.block_time(catalog.CHAINS_BY_HEX["0x1"], first),
                                    catalog.block_time(catalog.CHAINS_BY_HEX["0x1"], last), stream=sim_swaps)
    lost = [b for b in matched if b.missed]
    dropped = {b.number for b in lost}
    assert len(dropped) >= 3
    assert all(d.fate == truth.NOT_ACTIVE for b in lost for d in b.deliveries)
    assert all(paused_at <= d.date <= resumed_at for b in lost for d in b.deliveries)

    # The missing blocks listed are exactly those the simulator dropped while the stream was paused.
    assert page.locator("#scan .js-missing-count").inner_text().startswith(f"{len(dropped)} missing blocks")
    listed_blocks = [int(n) for n in page.locator("table.js-missing tbody tr td.mono").all_inner_texts()]
    assert sorted(listed_blocks) == listed_blocks and set(listed_blocks) == dropped
    assert len(listed_blocks) == len(dropped)
    screenshot(page, "missing-blocks-2-found")
    # A viewer sees the same list, without the right to spend the provider's budget or re-send.
    viewer_page.goto(f"/windows/{window.pk}/")
    assert viewer_page.locator("#scan .js-missing-count").inner_text() == page.locator(
        "#scan .js-missing-count").inner_text()
    assert viewer_page.locator("button.js-resend").count() == 0

    # Re-send them: the action's confirmation names the count and the scope.
    page.get_by_role("button", name=f"Re-send {len(dropped)} blocks").click()
    confirm = page.get_by_role("button", name=f"Re-send {len(dropped)} blocks", exact=True)
    confirm.wait_for()
    scope_text = page.locator(".confirm-scope").inner_text()
    assert f"Re-send {len(dropped)} missing blocks (chain 0x1, blocks {min(dropped)}–{max(dropped)})" in scope_text
    assert f"to stream {SWAPS}" in scope_text
    assert page.locator(".js-provider-warning").count() == 0
    screenshot(page, "missing-blocks-3-resend-confirm")
    # The simulator's clock stands still while the re-sends go out: set a minute ahead of the dashboard's, what the
    # provider makes for them is dated after each went out, as with a clock that runs.
    world.sim.world.clock.advance(datetime.now(UTC).timestamp() + 60 - world.sim.world.clock.timestamp())
    confirm.click()
    page.get_by_text(f"{len(dropped)} of {len(dropped)} done").wait_for(timeout=60_000)
    resent = {number: count for (stream_id, number), count in world.sim.world.streams._resends.items()
              if stream_id == swaps.stream_id}
    assert resent == dict.fromkeys(dropped, 1), "each block re-sent once"
    assert "refused" not in page.locator("#action-live").inner_text()

    # Verified: after the next poll the window reads recovered N of N, nothing still missing.
    world.poll()
    page.goto(f"/windows/{window.pk}/")
    recovered = page.locator("#verification .js-recovered")
    assert recovered.inner_text().startswith(f"Recovered {len(dropped)} of {len(dropped)} re-sent blocks")
    assert page.locator("#verification .js-still-missing").count() == 0
    screenshot(page, "missing-blocks-4-recovered")
