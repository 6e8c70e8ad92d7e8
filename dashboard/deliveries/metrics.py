"""Prometheus metrics of the write path: what each stored batch did (see `ingest.store_records`), and the
processing latency of the deliveries it stored for the first time."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram

from dashboard.deliveries.latency import BOUNDS
from dashboard.deliveries.records import ParsedRecord
from dashboard.upstream.chains import find_chain

RECORDS = Counter(
    "dashboard_records_ingested",
    "Upstream history records stored, by source and result: new rows, changed rows rewritten, unchanged "
    "records left alone, rejected (unreadable) records.",
    ["source", "result"],
)
# Labelled by chain and confirmation only (never by stream: streams come and go, a series each would grow without
# bound), with the rollups' buckets, so its quantiles and the pages' agree within a bucket.
LATENCY = Histogram(
    "dashboard_delivery_latency_seconds",
    "Processing latency of deliveries stored for the first time: their first attempt minus their block's "
    "timestamp, by chain (the provider's name; 'other' for a chain not in the chain table) and confirmation.",
    ["chain", "confirmed"],
    buckets=BOUNDS,
)


def observe(source: str, *, new: int, changed: int, unchanged: int, rejected: int) -> None:
    for result, count in (("new", new), ("changed", changed), ("unchanged", unchanged), ("rejected", rejected)):
        # Every series exists from the first batch on, so rate() over it never starts from nothing.
        RECORDS.labels(source=source, result=result).inc(count)


def observe_latencies(inserted: Iterable[ParsedRecord]) -> None:
    """One observation per new delivery with a latency (a test webhook or a record without payload has none)."""
    series: dict[tuple[str, bool], list[float]] = {}
    for p in inserted:
        if p.latency_ms is not None and not p.is_test:
            series.setdefault((p.chain_id, bool(p.confirmed)), []).append(p.latency_ms / 1000)
    for (chain_id, confirmed), seconds in series.items():
        chain = find_chain(chain_id)
        child = LATENCY.labels(chain=chain.name if chain else "other", confirmed="true" if confirmed else "false")
        for value in seconds:
            child.observe(value)
