"""A quiet stream's alert opens and resolves, seen in the browser: a quiet_stream rule made in the admin; the
scenario's bsc-usdt-payments, whose contract emits nothing from S-50 min to S+10 min (its scripted quiet hour),
opens an incident on /alerts/ and a mail through a real SMTP server on loopback; once its deliveries are back, the
incident resolves (and a second mail says so). The same scenario at a sparse rate, quiet the same hour, alerts
nobody: an hour of such a stream expects too few deliveries to call its silence improbable.

Two simulators of the scenario, the dense one at 1.5 records a minute, the sparse one at 0.1, both starting at a
fixed moment, which is the dashboard's now too (its `timezone.now`, for its polls, evaluations and pages): their
worlds (each block, each gap between two) are the same at every run. The provider keeps a day of history; the
fortnight before it, which the dashboard would have stored from its earlier polls (the cold start needs 14 days),
is stored through the write path (`ingest.store_records`) as the simulator's world says it was delivered. The
clocks move forward together. Celery eager, so evaluations queue their mails in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.core.cache import cache
from django.utils import timezone

from dashboard.alerts.models import AlertRule, Condition, Incident
from dashboard.alerts.tasks import evaluate_alerts_task
from dashboard.celery import app as celery_app
from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Stream
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll
from dashboard.simulator import truth
from dashboard.sources.models import Source
from tests.alerts.smtp import Sink, smtp_sink
from tests.browser.fixtures import screenshot
from tests.conftest import START
from tests.factories import source_for

pytestmark = pytest.mark.browser

QUIET = "bsc-usdt-payments"
RULE = "Quiet streams"
DAY = 86400.0
# More than QUIET_MIN_HISTORY_DAYS (14) of history before the provider's window of a day.
STORED_DAYS = 16
GRACE = timedelta(minutes=5)


@pytest.fixture
def eager() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


@pytest.fixture
def sink(settings: Any) -> Iterator[Sink]:
    with smtp_sink() as running:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", running.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        yield running


def store_earlier_history(sim: Any, source: Source, tag: str) -> int:
    """The stream's deliveries older than the provider's window, back STORED_DAYS days, as the simulator's world
    recorded them, stored through the write path; how many."""
    world = sim.world
    now = world.clock.timestamp()
    stream = next(s for s in world.history.streams if s.tag == tag)
    until = now - world.history.window_seconds
    since = until - STORED_DAYS * DAY
    recorded = {d.id for b in truth.matching_blocks(world, since, until, stream=stream)
                for d in b.deliveries if d.fate == truth.RECORDED and d.date < until}
    deliveries = [d for d in world.history.matching_between(since, until) if d.id in recorded]
    records = [world.history.render(d, now, include_payload=False) for d in deliveries]
    for first in range(0, len(records), 2000):
        store_records(source, records[first:first + 2000])
    return len(records)


def poll_all(source: Source) -> None:
    """What the worker does every few seconds: polls until caught up, and reads the provider's streams."""
    for _ in range(20):
        result = poll(source)
        source.refresh_from_db()
        if result.complete and source.synced_through is not None:
            break
    sync_streams(source)


@contextmanager
def clocks_at(moment: datetime, *sims: Any) -> Iterator[None]:
    """Both worlds at `moment`: the simulators' clocks moved there for good, the dashboard's `timezone.now`
    running from there while the block runs."""
    for sim in sims:
        ahead = moment.timestamp() - sim.world.clock.timestamp()
        if ahead > 0:
            sim.world.clock.advance(ahead)
    real_now = timezone.now
    offset = moment - real_now()
    with mock.patch("django.utils.timezone.now", lambda: real_now() + offset):
        yield


@pytest.fixture
def at_start() -> Iterator[datetime]:
    """The dashboard's clock from the scenario's start on."""
    with clocks_at(START):
        yield START


def volume_of(page: Any, stream: Stream) -> Any:
    """The Streams page's expected-volume line of the stream."""
    row = page.locator("#streams-table tbody tr", has=page.locator(f"a[href='/streams/{stream.stream_id}/']"))
    return row.locator(".volume")


def test_a_quiet_streams_alert_opens_and_resolves_and_a_sparse_stream_stays_quiet(
    page: Any, make_simulator: Callable[..., Any], sink: Sink, no_stale_locks: None, eager: None, at_start: datetime
) -> None:
    cache.clear()  # the baselines learned once an hour by earlier tests
    start = at_start
    dense_sim = make_simulator(start=start, history_window_days=1, deliveries_per_minute=1.5)
    sparse_sim = make_simulator(start=start, history_window_days=1, deliveries_per_minute=0.1, seed=12)
    dense_source, sparse_source = source_for(dense_sim, "dense"), source_for(sparse_sim, "sparse")
    for sim, source in ((dense_sim, dense_source), (sparse_sim, sparse_source)):
        assert store_earlier_history(sim, source, QUIET) > 0
        poll_all(source)
    dense = Stream.objects.get(source=dense_source, tag=QUIET)
    sparse = Stream.objects.get(source=sparse_source, tag=QUIET)
    assert dense.provider_status == sparse.provider_status == "active"
    for stream in (dense, sparse):
        assert stream.first_delivery_at is not None
        assert stream.first_delivery_at < start - timedelta(days=15)
    # The simulator's truth: both streams are in their scripted quiet hour now.
    for sim, stream in ((dense_sim, dense), (sparse_sim, sparse)):
        sim_stream = sim.world.streams.stream(stream.stream_id)
        [(quiet_from, quiet_to)] = truth.quiet_hours(sim.world, sim_stream, start.timestamp(), start.timestamp())
        assert quiet_from == start.timestamp() - 50 * 60 and quiet_to == start.timestamp() + 10 * 60

    # The rule, made in the admin.
    page.goto("/admin/alerts/alertrule/add/")
    page.fill("#id_name", RULE)
    page.fill("#id_recipients", "ops@example.com")
    page.select_option("#id_condition", Condition.QUIET_STREAM.value)
    page.fill("#id_grace_minutes", str(int(GRACE.total_seconds() // 60)))
    page.fill("#id_cooldown_minutes", "0")
    # The quiet stream brings ~12 deliveries an hour in unconfirmed and confirmed pairs (dispersion ~2.4): its hour
    # of silence has probability ~0.006 — improbable at 0.01, not at the default 0.001 (once in ~7 days of blocks).
    page.fill("#id_quiet_probability", "0.01")
    page.click("input[name=_save]")
    page.get_by_text("was added successfully").wait_for()
    rule = AlertRule.objects.get(name=RULE)
    assert rule.condition == Condition.QUIET_STREAM

    # The evaluation after the poll: the dense stream's silence is improbable, the sparse one's is not.
    evaluate_alerts_task.delay()
    incident = Incident.objects.open().get(rule=rule)
    assert incident.stream_id == dense.stream_id
    page.goto("/alerts/")
    listed = page.locator("tr", has_text=RULE).filter(has_text=QUIET)
    listed.wait_for()
    assert listed.count() == 1 and "failing" in listed.inner_text()
    screenshot(page, "quiet-1-alerts-open")
    listed.get_by_role("link").click()
    page.wait_for_url(f"**/alerts/incidents/{incident.pk}/")
    assert QUIET in page.locator("h1").inner_text()
    screenshot(page, "quiet-2-incident")
    [opened] = sink.messages
    assert opened["Subject"].startswith("[QUIET]") and QUIET in opened["Subject"]
    assert sink.envelopes[0][1] == ["ops@example.com"]

    # The Streams page: the dense stream's expected volume is improbably unmet; the sparse one's too small to judge.
    page.goto("/streams/")
    dense_volume, sparse_volume = volume_of(page, dense), volume_of(page, sparse)
    # Its probability (~0.006) is above the page's own mark for improbable (the default rule's 0.001), so the line is
    # not red; the row carries the rule's open incident.
    assert "muted" in (dense_volume.get_attribute("class") or "")
    dense_row = page.locator("#streams-table tbody tr", has=page.locator(f"a[href='/streams/{dense.stream_id}/']"))
    assert dense_row.locator(".pill-incident", has_text="open incident").count() == 1
    assert dense_volume.inner_text().endswith("seen 0 since " + (dense.last_delivery_at or start).strftime("%H:%M"))
    assert "faint" in (sparse_volume.get_attribute("class") or "")
    assert sparse_volume.get_attribute("title") == "fewer than 5 expected"
    screenshot(page, "quiet-3-streams")

    # Deliveries come back after the quiet hour: the next poll and evaluation find the stream clear, and once the
    # grace period has passed (polls and evaluations going on meanwhile) the incident resolves.
    back = start + timedelta(minutes=40)
    for moment in (back, back + GRACE + timedelta(minutes=1)):
        with clocks_at(moment, dense_sim, sparse_sim):
            poll_all(dense_source)
            poll_all(sparse_source)
            evaluate_alerts_task.delay()
        incident.refresh_from_db()
        if moment == back:
            assert incident.clear_since is not None and incident.resolved_at is None
    assert incident.resolved_at is not None
    dense.refresh_from_db()
    assert dense.last_delivery_at is not None and dense.last_delivery_at > start + timedelta(minutes=10)
    assert not Incident.objects.filter(stream_id=sparse.stream_id).exists()
    page.goto("/alerts/")
    assert page.locator("tr", has_text=RULE).filter(has_text="resolved").count() == 1
    page.goto(f"/alerts/incidents/{incident.pk}/")
    page.get_by_text("Resolved:", exact=True).wait_for()
    screenshot(page, "quiet-4-resolved")
    assert len(sink.messages) == 2
    assert QUIET in sink.messages[1]["Subject"] and not sink.messages[1]["Subject"].startswith("[QUIET]")
