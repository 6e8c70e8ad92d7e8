"""`python -m dashboard.simulator`: run the simulator in the foreground until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from datetime import datetime
from types import FrameType

from dashboard.simulator.config import FaultConfig, SimulatorConfig
from dashboard.simulator.server import make_server

log = logging.getLogger("dashboard.simulator")


def parse_args(argv: list[str] | None = None) -> SimulatorConfig:
    p = argparse.ArgumentParser(prog="python -m dashboard.simulator", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001, help="0 picks a free port")
    p.add_argument("--api-key", default="demo-key", help="the key clients must send (never logged)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per real second (60: a minute a second)"
    )
    p.add_argument(
        "--start",
        type=datetime.fromisoformat,
        default=None,
        help="simulated start time, ISO 8601 with offset (default: now)",
    )
    p.add_argument(
        "--scenario-start",
        type=datetime.fromisoformat,
        default=None,
        help="anchor of the scripted incidents, ISO 8601 with offset (default: the start); pass the first "
        "start when restarting, so that records already served do not change",
    )
    p.add_argument(
        "--deliveries-per-minute",
        type=float,
        default=0.4,
        help="history records per simulated minute across all streams",
    )
    p.add_argument("--history-days", type=int, default=7)
    p.add_argument(
        "--sporadic-failure-rate", type=float, default=0.012,
        help="share of webhook attempts failing outside any incident",
    )
    p.add_argument("--streams", type=int, default=6)
    p.add_argument(
        "--receiver-back-after",
        type=float,
        default=240.0,
        help="simulated seconds after the scenario's start when the receiver that is down comes back "
        "(POST /simulator/receivers/up brings it back at once)",
    )
    p.add_argument(
        "--owners-sync-delay",
        type=float,
        default=20.0,
        help="simulated seconds a newly requested contract stays SYNCING",
    )
    p.add_argument(
        "--public-url",
        default=None,
        help="base URL browsers reach the simulator on, for thumbnail URLs (default: the request's Host)",
    )
    p.add_argument("--rate-429", type=float, default=0.0)
    p.add_argument("--retry-after", type=float, default=1.0)
    p.add_argument(
        "--rate-limit", type=float, default=0.0,
        help="requests per second the API answers; beyond it a 429 with the wait as its Retry-After (0: none)",
    )
    p.add_argument("--rate-5xx", type=float, default=0.0)
    p.add_argument("--latency-ms", type=int, default=0)
    p.add_argument("--truncate-rate", type=float, default=0.0)
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return SimulatorConfig(
        host=a.host,
        port=a.port,
        api_key=a.api_key,
        seed=a.seed,
        speed=a.speed,
        start=a.start,
        scenario_start=a.scenario_start,
        deliveries_per_minute=a.deliveries_per_minute,
        sporadic_failure_rate=a.sporadic_failure_rate,
        history_window_days=a.history_days,
        streams=a.streams,
        receiver_back_after=a.receiver_back_after,
        owners_sync_delay=a.owners_sync_delay,
        public_url=a.public_url,
        faults=FaultConfig(
            rate_429=a.rate_429,
            retry_after=a.retry_after,
            rate_limit=a.rate_limit,
            rate_5xx=a.rate_5xx,
            latency_ms=a.latency_ms,
            truncate_rate=a.truncate_rate,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    server = make_server(config)
    host, port = server.server_address[:2]

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        # shutdown() waits for serve_forever() to return, so it must not run on the serving thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    world = server.world
    log.info(
        "simulator on http://%s:%d (seed %d, speed %g, %d history records, now %s); "
        "Aptos hosts at /aptos/mainnet and /aptos/testnet",
        host,
        port,
        config.seed,
        config.speed,
        world.history.page(world.clock.timestamp(), 1)[1],  # the count, without rendering every record
        world.clock.now().isoformat(),
    )
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
