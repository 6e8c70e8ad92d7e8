"""The poll lock is a lease its holder's heartbeat renews: a live holder keeps it however long it works, a
killed one frees it within one lease."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from django.conf import settings

from dashboard.locks import exclusive, redis_client
from dashboard.polling.jobs import poll_source, source_lock_name
from dashboard.sources.models import Source
from tests.checks import assert_matches_upstream
from tests.factories import source_for
from tests.polling.children import manage, wait_for_walk_pages


def test_a_live_holder_keeps_its_lock_for_many_leases() -> None:
    name = "test-live-holder"
    with exclusive(name, lease=3) as held:
        assert held is not None
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            # Nobody else gets it while the heartbeat renews it, long after a lease would have run out.
            with exclusive(name, lease=3) as other:
                assert other is None
            assert 0 < redis_client().pttl(f"lock:{name}") <= 3000
            time.sleep(0.5)
        assert held.keep() and not held.lost
    # Released on leaving the block, not left to expire.
    assert redis_client().exists(f"lock:{name}") == 0


def test_a_holder_that_lost_its_lock_is_told() -> None:
    name = "test-lost"
    with exclusive(name, lease=3) as held:
        assert held is not None
        # What a Redis outage longer than the lease does: the key is gone and someone else took it.
        redis_client().set(f"lock:{name}", "someone-else", ex=30)
        assert not held.keep()
        assert held.lost
    # The newcomer's lock is left alone.
    assert redis_client().get(f"lock:{name}") == b"someone-else"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("command", "walk"), [("poll_history", "head"), ("backfill_history", "backfill")])
def test_a_killed_holder_frees_the_poll_lock_within_one_lease(
    make_simulator: Any, command: str, walk: str
) -> None:
    sim = make_simulator(history_window_days=3)
    source = source_for(sim)
    sim.world.faults.latency_ms = 120
    child = manage(command, "--source", source.name, *(["--no-progress"] if walk == "backfill" else []))
    try:
        wait_for_walk_pages(source, walk, 2, child)
        child.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    sim.world.faults.latency_ms = 0
    assert redis_client().exists(f"lock:{source_lock_name(source.pk)}") == 1

    # The next scheduled poll, as a worker runs it, every half second until it gets the lock.
    attempts = 0
    while True:
        tried = time.monotonic()
        run = poll_source(Source.objects.get(pk=source.pk))
        attempts += 1
        if run.skipped != "a poll of this source is already running":
            break
        assert time.monotonic() - killed < 120, "the dead holder's lock never freed"
        time.sleep(0.5)
    freed_after = tried - killed
    print(f"\n{command} SIGKILLed mid-walk: the next poll took the lock {freed_after:.1f} s later "
          f"(LOCK_LEASE_SECONDS={settings.LOCK_LEASE_SECONDS})")

    assert attempts > 1, "the lock should outlive its holder by up to one lease, not vanish with it"
    assert freed_after <= settings.LOCK_LEASE_SECONDS + 2
    assert run.result is not None and run.error == ""
    assert_matches_upstream(sim)
