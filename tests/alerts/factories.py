"""Plain factory functions for alert tests: sources, upstream-shaped history records, rules."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from dashboard.alerts.models import AlertRule
from dashboard.sources.models import Source
from tests import factories

STREAM = "9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11"
OTHER_STREAM = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
HOOK = "https://hooks.example.com/moralis"
REFUSED = "connect ECONNREFUSED 203.0.113.7:443"
HOSTILE_ERROR = 'connect ECONNREFUSED 203.0.113.7:443 <script>alert("x")</script>'


def fixed_now() -> datetime:
    return timezone.now().replace(microsecond=0)


def make_source(name: str = "upstream", **fields: Any) -> Source:
    # Polling works throughout: tests move `now` hours ahead without running polls, and a source whose last
    # good poll lies behind `now` would hold incidents open as unseen. Stale-poller tests pass their own.
    fields.setdefault("last_success_at", timezone.now() + timedelta(days=2))
    return factories.make_source(name, **fields)


def record(
    date: datetime,
    *,
    error: str = "",
    retries: int = 0,
    stream_id: str = STREAM,
    tag: str = "orders",
    webhook_url: str = HOOK,
    record_id: str | None = None,
    block: int = 19_000_000,
) -> dict[str, Any]:
    """One history record shaped like the upstream's (and the simulator's), without a payload."""
    return factories.history_record(
        date=date, record_id=record_id, stream_id=stream_id, tag=tag, webhook_url=webhook_url, error=error,
        retries=retries, confirmed=False, block=block,
    )


store = factories.store


def failures(source: Source, now: datetime, count: int, *, error: str = REFUSED, **kw: Any) -> list[dict[str, Any]]:
    """`count` failed deliveries, ten seconds apart, just before `now`, oldest first, stored."""
    records = [
        record(now - timedelta(seconds=10 * (count - i)), error=error, block=19_000_000 + i, **kw) for i in range(count)
    ]
    store(source, *records)
    return records


def successes(source: Source, now: datetime, count: int, **kw: Any) -> list[dict[str, Any]]:
    records = [record(now - timedelta(seconds=30 * (count - i)), block=19_100_000 + i, **kw) for i in range(count)]
    store(source, *records)
    return records


def make_rule(name: str = "Failed deliveries", **fields: Any) -> AlertRule:
    fields.setdefault("condition", "any_failure")
    fields.setdefault("recipients", "ops@example.com, oncall@example.com")
    fields.setdefault("window_minutes", 15)
    fields.setdefault("grace_minutes", 10)
    fields.setdefault("cooldown_minutes", 30)
    return AlertRule.objects.create(name=name, **fields)
