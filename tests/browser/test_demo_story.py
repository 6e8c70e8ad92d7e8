"""The demo's story, walked in the browser as a new user walks it in the demo's first minutes (the
README's "Walk the story"): the alert for treasury-wallets, down at the provider since before the start, is
acknowledged; its stream shows the cause (in error, its deliveries refused with ECONNREFUSED); the receiver
comes back; the stream is reactivated, its failures replayed from the incident page, and the next poll and
evaluation verify it (the incident resolves).

Against a private simulator of the default scenario, anchored at the real start like a demo's first start; its
clock stands still, so the receiver comes back through the simulator's documented control. The default alert
rules, ALERT_EMAILS set, a user in the Staff role; Celery eager, so a confirmed action runs as in a worker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import httpx
import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.utils import timezone

from dashboard.accounts.roles import STAFF, assign_role, sync_roles
from dashboard.actions.models import ActionKind, ActionState, ProviderAction
from dashboard.alerts.evaluate import evaluate_all
from dashboard.alerts.models import AlertRule, Incident
from dashboard.celery import app as celery_app
from dashboard.deliveries.models import Delivery, Stream
from dashboard.polling.jobs import poll_source
from dashboard.polling.stream_sync import sync_streams
from dashboard.sources.models import Source
from tests.browser.fixtures import context_for, screenshot
from tests.conftest import SIMULATOR_KEY, make_user
from tests.factories import source_for

pytestmark = pytest.mark.browser

TREASURY = "treasury-wallets"
DOWN_RULE = "Stream down at the provider"
DELIVERIES_PAGE = 50


@pytest.fixture
def eager() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


@pytest.fixture
def default_rules(transactional_db: None) -> None:
    """The rules migrate creates (the flush after a live-server test removes them: they are put back the way
    the migrations put them)."""
    for module in ("0002_default_rules", "0003_provider_error_state"):
        migration = importlib.import_module(f"dashboard.alerts.migrations.{module}")
        create = getattr(migration, "create_default_rules", None) or migration.create_rule
        create(apps, None)


@pytest.fixture
def oncall(transactional_db: None) -> User:
    """A user in the Staff role: may acknowledge incidents and act at the provider."""
    sync_roles()
    user = make_user("oncall", role=None)
    assign_role(user, STAFF)
    return user


@pytest.fixture
def story_page(browser: Any, live_server: Any, oncall: User) -> Iterator[Any]:
    context = context_for(browser, live_server, oncall)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@contextmanager
def later(sim: Any, delta: timedelta) -> Iterator[None]:
    """`delta` from now on both clocks: the simulator's (moved for good) and the dashboard's (its polls and
    evaluations, which read `timezone.now`, while the block runs)."""
    sim.world.clock.advance(delta.total_seconds())
    real_now = timezone.now
    with mock.patch("django.utils.timezone.now", lambda: real_now() + delta):
        yield


def failing_of(stream: Stream) -> set[Any]:
    return set(Delivery.objects.filter(stream_id=stream.stream_id).failures().values_list("pk", flat=True))


def after_blip(sim: Any, stream: Stream) -> None:
    """Move the simulator's clock past a random incident under way on the stream's receiver, if any."""
    world = sim.world
    now = world.clock.timestamp()
    blip = world.history.incident_at(world.streams.stream(stream.stream_id).webhook, now)
    if blip is not None:
        world.clock.advance(blip.end - now + 1)


def replay_failures(
    page: Any, incident: Incident, count: int, *, shot: str = "", done_shot: str = ""
) -> None:
    """The incident page's "Replay failures…": the confirmation page warns of no refusal and offers the
    replay of `count` deliveries; confirmed (the action runs eagerly), the action page says every one was
    replayed."""
    page.goto(f"/alerts/incidents/{incident.pk}/")
    page.get_by_role("button", name="Replay failures…").click()
    deliveries = f"{count} deliver{'y' if count == 1 else 'ies'}"
    confirm = page.get_by_role("button", name=f"Replay {deliveries}", exact=True)
    confirm.wait_for()
    assert page.locator(".js-provider-warning").count() == 0
    assert page.locator("#refusal-expected").count() == 0
    assert confirm.is_enabled()
    if shot:
        screenshot(page, shot)
    confirm.click()
    page.get_by_text(f"{count} of {count} done").wait_for(timeout=60_000)
    page.locator("#action-live .pill-action-done").first.wait_for()
    answer = page.locator("#action-live").inner_text()
    assert f"{count} of {count} replayed" in answer
    assert "refused" not in answer and "answer lost" not in answer
    if done_shot:
        screenshot(page, done_shot)


def poll_all(source: Source) -> None:
    """What the worker does every few seconds: polls until caught up, and reads the provider's streams."""
    for _ in range(20):
        run = poll_source(source)
        source.refresh_from_db()
        assert not run.error, run.summary
        if run.result is not None and run.result.complete and source.synced_through is not None:
            break
    sync_streams(source)


def test_the_demo_story_alert_acknowledge_cause_fix_reactivate_replay_verified(
    story_page: Any,
    make_simulator: Callable[..., Any],
    default_rules: None,
    no_stale_locks: None,
    eager: None,
    settings: Any,
) -> None:
    page = story_page
    settings.ALERT_EMAILS = ["ops@example.com"]
    assert AlertRule.objects.filter(name=DOWN_RULE, enabled=True).exists()
    sim = make_simulator(start=timezone.now())
    source = source_for(sim)

    # The demo's first poll and evaluation: treasury-wallets is in error at the provider.
    poll_all(source)
    evaluate_all()
    treasury = Stream.objects.get(source=source, tag=TREASURY)
    assert treasury.provider_status == "error"
    incident = Incident.objects.open().get(rule__name=DOWN_RULE, stream_id=treasury.stream_id)

    # The alert: the Overview lists the open incident; it opens on a click.
    page.goto("/")
    listed = page.locator("#open-incidents tr", has_text=DOWN_RULE).filter(has_text=TREASURY)
    listed.wait_for()
    assert "not acknowledged" in listed.inner_text()
    screenshot(page, "story-1-overview-alert")
    listed.locator(f"a[href='/alerts/incidents/{incident.pk}/']").click()
    page.wait_for_url(f"**/alerts/incidents/{incident.pk}/")
    assert TREASURY in page.locator("h1").inner_text()
    provider_status = page.locator("p", has_text="Provider status:").inner_text()
    assert "the provider reported the stream error" in provider_status

    # Acknowledge.
    page.get_by_role("button", name="Acknowledge").click()
    page.locator("p", has_text="Acknowledged:").filter(has_text="by oncall").wait_for()
    assert page.get_by_role("button", name="Acknowledge").count() == 0
    screenshot(page, "story-2-incident-acknowledged")

    # The cause: the stream is in error at the provider, its deliveries were refused by the receiver.
    page.locator("#incident-stream").click()
    page.wait_for_url(f"**/streams/{treasury.stream_id}/")
    assert page.locator("#provider-status").inner_text() == "error"
    screenshot(page, "story-3-stream-in-error")
    page.get_by_role("main").get_by_role("link", name="Errors", exact=True).click()
    page.get_by_text("ECONNREFUSED").first.wait_for()
    screenshot(page, "story-4-cause-econnrefused")

    # The fix: the receiver is back (the simulator's control; in the demo it also comes back at minute 4).
    answer = httpx.post(
        f"{sim.base_url}/simulator/receivers/up",
        headers={"X-API-Key": SIMULATOR_KEY},
        json={"streamId": treasury.stream_id},
    )
    assert answer.status_code == 200, answer.text

    # Reactivate: the confirmation page says what will happen; confirmed, it runs (eager), the page says so.
    page.goto(f"/streams/{treasury.stream_id}/")
    page.get_by_role("button", name="Reactivate…").click()
    page.get_by_text("Reactivating it makes the provider send blocks again").wait_for()
    assert page.locator("#refusal-expected").count() == 0
    screenshot(page, "story-5-reactivate-confirm")
    page.get_by_role("button", name="Reactivate the stream").click()
    page.locator(".pill-action-done").first.wait_for()
    reactivation = ProviderAction.objects.get(kind=ActionKind.SET_STATUS, stream_id=treasury.stream_id)
    assert reactivation.state == ActionState.DONE, reactivation.answer
    screenshot(page, "story-6-reactivated")

    # Replay the failures from the incident page: nothing refused, every one replayed.
    failing = failing_of(treasury)
    assert len(failing) > 1
    replay_failures(page, incident, len(failing), shot="story-7-replay-confirm", done_shot="story-8-replayed")

    # Verified: the next poll stores the replays' results; the deliveries list shows them delivered. A
    # receiver that is back may still drop a request now and then (the simulator's sporadic failures): what
    # failed again is replayed once more the same way, as a user would (after waiting out a blip of the
    # receiver, if one is under way).
    poll_all(source)
    for _ in range(3):
        again = failing_of(treasury) & failing
        if not again:
            break
        after_blip(sim, treasury)
        replay_failures(page, incident, len(again))
        poll_all(source)
    again = failing_of(treasury) & failing
    assert not again, f"{len(again)} of {len(failing)} still failing after the replays"
    page.goto(f"/deliveries/?stream={treasury.stream_id}&status=failing")
    page.get_by_text("No deliveries match.").wait_for()
    page.goto(f"/deliveries/?stream={treasury.stream_id}")
    rows = page.locator("#deliveries-table tbody tr")
    rows.first.wait_for()
    replayed = {f"/deliveries/{pk}/" for pk in failing}
    shown = [row for row in rows.all() if row.get_attribute("data-href") in replayed]
    assert len(shown) == min(len(failing), DELIVERIES_PAGE)
    assert all(row.locator(".status-delivered").count() == 1 for row in shown)
    screenshot(page, "story-9-deliveries-delivered")

    # The stream stays active: the incident is clear, and resolves once its grace period has passed (polls and
    # evaluations go on meanwhile, as the worker makes them).
    evaluate_all()
    incident.refresh_from_db()
    assert incident.clear_since is not None and incident.resolved_at is None
    grace = AlertRule.objects.get(name=DOWN_RULE).grace
    with later(sim, grace + timedelta(seconds=30)):
        poll_all(source)
        evaluate_all()
    incident.refresh_from_db()
    assert incident.resolved_at is not None
    page.goto(f"/alerts/incidents/{incident.pk}/")
    page.get_by_text("Resolved:", exact=True).wait_for()
    assert page.locator("#impact").get_by_text("failing", exact=True).count() == 0
    screenshot(page, "story-10-incident-resolved")
