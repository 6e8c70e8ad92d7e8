"""Seen, fixed and verified in the browser, against the simulator: a failed delivery replayed from its page,
a stream's failures replayed in bulk with progress, a stream in error reactivated from its page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dashboard.actions.models import ReplayItem
from dashboard.celery import app as celery_app
from dashboard.deliveries.models import Delivery, Stream
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll
from dashboard.sources.models import Source
from tests.actions.test_replay import active_failures
from tests.browser.fixtures import screenshot
from tests.conftest import SIMULATOR_KEY
from tests.factories import source_for

pytestmark = pytest.mark.browser


@pytest.fixture
def eager() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


@pytest.fixture
def stored(transactional_db: None, sim: Any, no_stale_locks: None) -> Source:
    source = source_for(sim)
    for _ in range(20):
        if poll(source).complete and source.synced_through is not None:
            break
    sync_streams(source)
    return source


def after_incident(sim: Any, stream_id: str) -> None:
    """Move the simulator's clock past the incident on the stream's webhook URL, if one is under way: the
    operator replays once the receiver is fixed."""
    world = sim.world
    incident = world.history.incident_at(world.streams.stream(stream_id).webhook, world.clock.timestamp())
    if incident is not None:
        world.clock.advance(incident.end - world.clock.timestamp() + 1)


def test_a_failed_delivery_replayed_from_its_page_turns_delivered(
    page: Any, stored: Source, sim: Any, eager: None
) -> None:
    # Five minutes in, the swaps' slow receiver has failed some deliveries of a stream the provider keeps active;
    # the operator fixes the receiver (the simulator's control), then replays one of them.
    stream_id, failing = active_failures(stored, sim)
    delivery = failing[-1]
    answer = httpx.post(
        f"{sim.base_url}/simulator/receivers/up", headers={"X-API-Key": SIMULATOR_KEY}, json={"streamId": stream_id}
    )
    assert answer.status_code == 200, answer.text
    page.goto(f"/deliveries/{delivery.pk}/")
    page.get_by_role("button", name="Replay…").click()
    page.get_by_text("Replay 1 delivery").wait_for()
    page.get_by_role("button", name="Replay 1 delivery").click()
    page.locator(".pill-action-done").first.wait_for()
    poll(stored)
    page.goto(f"/deliveries/{delivery.pk}/")
    assert page.locator("h1 .status-delivered").count() == 1
    assert page.locator("#replays").get_by_text("delivered").count() >= 1
    screenshot(page, "replayed-delivery")


def test_a_stream_in_error_is_reactivated_then_its_failures_replayed_in_bulk(
    page: Any, stored: Source, sim: Any, eager: None
) -> None:
    down = Stream.objects.filter(source=stored, provider_status="error").first()
    assert down is not None, "the scripted incident put a stream in error"
    after_incident(sim, down.stream_id)

    page.goto(f"/streams/{down.stream_id}/")
    assert page.locator("#provider-status").inner_text() == "error"
    page.get_by_role("button", name="Reactivate…").click()
    page.get_by_text("Reactivating it makes the provider send blocks again").wait_for()
    page.get_by_role("button", name="Reactivate the stream").click()
    page.locator(".pill-action-done").first.wait_for()
    sync_streams(stored)
    page.goto(f"/streams/{down.stream_id}/")
    assert page.locator("#provider-status").inner_text() == "active"

    targeted = set(Delivery.objects.filter(source=stored, stream_id=down.stream_id).failures().values_list("pk", flat=True))
    failing = len(targeted)
    assert failing > 1
    page.goto(f"/deliveries/?stream={down.stream_id}&status=failing")
    page.get_by_role("button", name="Replay these…").click()
    page.get_by_role("button", name=f"Replay {failing} deliveries").click()
    page.get_by_text(f"{failing} of {failing} done").wait_for(timeout=60_000)
    screenshot(page, "bulk-replay-done")
    poll(stored)
    # A receiver that is back can still drop one request now and then: those are replayed once more, singly.
    again = set(ReplayItem.objects.filter(delivered=False).values_list("delivery_id", flat=True))
    assert len(again) <= failing // 4
    for pk in again:
        page.goto(f"/deliveries/{pk}/")
        page.get_by_role("button", name="Replay…").click()
        page.get_by_role("button", name="Replay 1 delivery").click()
        page.locator(".pill-action-done").first.wait_for()
    still = Delivery.objects.filter(pk__in=targeted).failures().count()
    answers = list(ReplayItem.objects.values_list("delivery_id", "delivered", "answer"))
    assert still == 0, f"{still} of {failing} still failing after the replay: {answers}"
    assert ReplayItem.objects.filter(delivery_id__in=targeted).count() == failing + len(again)
