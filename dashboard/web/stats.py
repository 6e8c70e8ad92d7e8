"""Small aggregates the pages share, computed in Python from one grouped rollup query each."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class SliceStats:
    """Counts of one stream, tag, URL or error group over a window, and over its recent part."""

    key: Any
    label: str = ""
    total: int = 0
    failed: int = 0
    retried: int = 0
    total_recent: int = 0
    failed_recent: int = 0
    retried_recent: int = 0
    last_hour: datetime | None = None
    tags: set[str] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)
    streams: set[str] = field(default_factory=set)
    chains: set[str] = field(default_factory=set)

    @property
    def ok(self) -> int:
        return self.total - self.failed

    @property
    def ok_recent(self) -> int:
        return self.total_recent - self.failed_recent

    @property
    def success_rate(self) -> float | None:
        return 100.0 * (self.total - self.failed) / self.total if self.total else None

    @property
    def success_rate_recent(self) -> float | None:
        if not self.total_recent:
            return None
        return 100.0 * (self.total_recent - self.failed_recent) / self.total_recent

    def add(self, row: dict[str, Any]) -> None:
        self.total += row["total"]
        self.failed += row["failed"]
        self.retried += row["retried"]
        self.total_recent += row.get("total_recent", 0)
        self.failed_recent += row.get("failed_recent", 0)
        self.retried_recent += row.get("retried_recent", 0)
        if row.get("last_hour") and (self.last_hour is None or row["last_hour"] > self.last_hour):
            self.last_hour = row["last_hour"]
            if "tag" in row:
                self.label = row["tag"]
        for name, target in (("tag", self.tags), ("webhook_url", self.urls), ("stream_id", self.streams),
                             ("chain_id", self.chains)):
            if row.get(name):
                target.add(row[name])


def group_rows(rows: Iterable[dict[str, Any]], key: str) -> dict[Any, SliceStats]:
    result: dict[Any, SliceStats] = {}
    for row in rows:
        stats = result.get(row[key])
        if stats is None:
            stats = result[row[key]] = SliceStats(row[key])
        stats.add(row)
    return result
