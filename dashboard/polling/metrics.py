"""Prometheus metrics of the scheduled polls (see `jobs.poll_source`)."""

from __future__ import annotations

from prometheus_client import Counter

POLLS = Counter(
    "dashboard_polls",
    "Scheduled polls of a source by outcome: ok, incomplete (continues next run), skipped_disabled, "
    "skipped_backoff, skipped_locked, time_limit, database_error, or the kind of the error that failed it "
    "(rejected_key, rate_limited, unreachable, bad_response, upstream_error).",
    ["source", "outcome"],
)


def observe(source: str, outcome: str) -> None:
    POLLS.labels(source=source, outcome=outcome).inc()
