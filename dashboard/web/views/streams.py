"""One row per stream: recent success, failures, retries and an estimate of the provider's health rule."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.deliveries import url_health
from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.web.stats import SliceStats, group_rows


class StreamEntry(TypedDict):
    stats: SliceStats
    last_delivery: datetime | None
    urls: list[tuple[str, url_health.UrlHealth | None]]
    health: url_health.UrlHealth | None


@viewer_required
def stream_list(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    day_ago = HourlyRollup.hour_of(now - timedelta(hours=24))
    # Streams silent for longer than raw history is kept are gone from every other page too.
    kept = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    rows = HourlyRollup.objects.between(kept, None).by_dimensions(
        "stream_id", "tag", "webhook_url", "chain_id", split_at=day_ago
    )
    streams = group_rows(rows, "stream_id")
    last_dates = Delivery.objects.last_delivery_dates(streams)
    health = url_health.url_health_now(now)

    entries: list[StreamEntry] = []
    for stats in streams.values():
        healths = [health[url] for url in sorted(stats.urls) if url in health]
        entries.append(
            {
                "stats": stats,
                "last_delivery": last_dates.get(stats.key),
                "urls": [(url, health.get(url)) for url in sorted(stats.urls)],
                "health": url_health.worst(healths),
            }
        )
    order = {"error": 0, "at-risk": 1, "ok": 2}
    entries.sort(key=lambda e: (order[e["health"].state] if e["health"] else 3, e["stats"].label, e["stats"].key))
    counts = {
        state.replace("-", "_"): sum(1 for e in entries if e["health"] and e["health"].state == state)
        for state in order
    }
    context = {
        "nav": "streams",
        "entries": entries,
        "counts": counts,
        "error_below": url_health.ERROR_BELOW,
        "warn_below": url_health.WARN_BELOW,
        "horizon": url_health.WARN_HORIZON_HOURS,
    }
    return render(request, "web/streams.html", context)
