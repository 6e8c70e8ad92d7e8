"""Everything that shapes a simulator run: where it listens, its key, its seed, clock and faults."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class FaultConfig:
    """Failure knobs. Mutable on a running simulator (`running.world.faults.rate_5xx = 1.0`)."""

    # Share of requests answered 429 with a Retry-After header.
    rate_429: float = 0.0
    retry_after: float = 1.0
    # Requests per second the API answers (a token bucket holding one second of them); a request beyond it is
    # answered 429 with the seconds until the bucket has a request again as its Retry-After. 0: no limit.
    rate_limit: float = 0.0
    # Share of requests answered with one of 500/502/503/504.
    rate_5xx: float = 0.0
    # Added before every answer; the timeout knob for tests.
    latency_ms: int = 0
    # Share of 200 answers whose body is cut short.
    truncate_rate: float = 0.0
    # "connection": announce the full length then drop the connection mid-body (what a broken proxy does);
    # "body": a shorter body with a matching Content-Length, i.e. a 200 whose JSON does not parse.
    truncate_mode: str = "connection"
    # A replay's delivery log carries the record's retry count plus one, as a provider that counts a replay as
    # a retry would log it (the contract's provider leaves the count unchanged; clients must tolerate both).
    replay_counts_as_retry: bool = False


@dataclass
class SimulatorConfig:
    host: str = "127.0.0.1"
    port: int = 8001
    api_key: str = "demo-key"
    seed: int = 1
    # Simulated seconds per real second: 60 makes one real second a simulated minute; 0 freezes the
    # clock so that only explicit `world.clock.advance()` moves it (what tests want).
    speed: float = 1.0
    # Simulated "now" at startup; None means the real current time.
    start: datetime | None = None
    # Anchor of the scripted incidents (the trouble a demo shows at first sight); None means `start`.
    # A simulator restarted later passes its first start, so the history it already served stays the same.
    scenario_start: datetime | None = None
    # History records (an unconfirmed and a confirmed one per block) per simulated minute across all streams.
    # 0.4 a minute gives about 4,000 records over the 7-day window: a realistic demo that ingests quickly.
    deliveries_per_minute: float = 0.4
    # Share of webhook attempts failing outside any incident (a timeout, a hang-up, a 5xx, a reset).
    sporadic_failure_rate: float = 0.012
    history_window_days: int = 7
    streams: int = 6
    # Seconds after the scenario's start when the receiver that is down at the start comes back (scenario.py);
    # `POST /simulator/receivers/up` brings it back earlier.
    receiver_back_after: float = 240.0
    # How long a newly requested NFT contract stays SYNCING, in simulated seconds.
    owners_sync_delay: float = 20.0
    # Base URL that browsers reach the simulator on, for the media (thumbnail) URLs in owners answers;
    # None means the URL each request came in on (its Host header).
    public_url: str | None = None
    # Seconds a connection may sit idle (between requests, or inside one) before the server drops it.
    idle_timeout: float = 60.0
    faults: FaultConfig = field(default_factory=FaultConfig)
