"""Prometheus metrics of the write path: what each stored batch did (see `ingest.store_records`)."""

from __future__ import annotations

from prometheus_client import Counter

RECORDS = Counter(
    "dashboard_records_ingested",
    "Upstream history records stored, by source and result: new rows, changed rows rewritten, unchanged "
    "records left alone, rejected (unreadable) records.",
    ["source", "result"],
)


def observe(source: str, *, new: int, changed: int, unchanged: int, rejected: int) -> None:
    for result, count in (("new", new), ("changed", changed), ("unchanged", unchanged), ("rejected", rejected)):
        # Every series exists from the first batch on, so rate() over it never starts from nothing.
        RECORDS.labels(source=source, result=result).inc(count)
