"""The rate-limit knob: a token bucket of `rate_limit` requests a second, a 429 beyond it saying how long to wait."""

from __future__ import annotations

import time

import httpx

from dashboard.simulator.server import RunningSimulator


def test_requests_beyond_the_rate_are_refused_with_the_wait_until_the_next(sim: RunningSimulator,
                                                                            http: httpx.Client) -> None:
    sim.world.faults.rate_limit = 5.0
    answers = [http.get("/history", params={"limit": 1}) for _ in range(8)]
    statuses = [a.status_code for a in answers]
    # One second's worth at once, then refusals until the bucket fills again.
    assert statuses[:5] == [200] * 5 and 429 in statuses[5:]
    refused = next(a for a in answers if a.status_code == 429)
    assert 0 < float(refused.headers["Retry-After"]) <= 0.2
    assert refused.json() == {"message": "Rate limit exceeded"}
    time.sleep(float(refused.headers["Retry-After"]) + 0.05)
    assert http.get("/history", params={"limit": 1}).status_code == 200
    sim.world.faults.rate_limit = 0.0
    assert {http.get("/history", params={"limit": 1}).status_code for _ in range(20)} == {200}
