"""Streams: the Streams page's rows (`web.views.streams.stream_entries`) with the error budgets of its column
(`expectations.objectives.budgets`), and one stream as its page reads it."""


from datetime import timedelta
from typing import Any

from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Query, Router

from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, key_cursor, next_url, on_replica, read_key_cursor
from dashboard.api.problems import Problem, refuse_unknown
from dashboard.api.schemas import BudgetOut, HealthOut, StreamDetail, StreamList
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries import url_health
from dashboard.deliveries.models import Stream, StreamPeriodRollup
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.expectations import objectives
from dashboard.web.views.streams import stream_entries

router = Router(tags=["streams"])


def _health(health: url_health.UrlHealth | None) -> HealthOut | None:
    if health is None:
        return None
    return HealthOut(
        webhook_url=health.webhook_url, state=health.state, rate=health.rate, lowest=health.lowest,
        trend_per_hour=health.trend_per_hour, hours_to_error=health.hours_to_error,
    )


def _budget(budget: objectives.Budget | None) -> BudgetOut | None:
    if budget is None:
        return None
    return BudgetOut(
        since=budget.since, until=budget.until, delivery_target=budget.objective.delivery_target,
        delivery_budget_left=budget.delivery.budget_left, latency_budget_left=budget.latency.budget_left,
        least_left=budget.least_left,
    )


@router.get("/streams", response=StreamList, summary="Streams with 24 h counts, health, latency and budget")
@on_replica
def stream_list(
    request: HttpRequest,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=200, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    """In the Streams page's order: worst health first."""
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    now = timezone.now()
    entries = stream_entries(now)
    start = 0
    after = read_key_cursor(cursor)
    if after is not None:
        keys = [e["stats"].key for e in entries]
        if after not in keys:
            raise Problem(400, "cursor: the list changed since this cursor; start again without it.",
                          kind="invalid-parameter")
        start = keys.index(after) + 1
    more = start + limit < len(entries)
    entries = entries[start : start + limit]
    budgets = objectives.budgets(now, [e["stats"].key for e in entries])
    items = []
    for entry in entries:
        stats, row, latency = entry["stats"], entry["row"], entry["latency"]
        items.append({
            "stream_id": stats.key,
            "tag": stats.label,
            "webhook_urls": sorted(stats.urls),
            "chains": sorted(stats.chains),
            "last_delivery": entry["last_delivery"],
            "provider_status": row.provider_status if row else "",
            "provider_status_since": row.provider_status_since if row else None,
            "deliveries_24h": stats.total_recent,
            "failing_24h": stats.failed_recent,
            "retried_24h": stats.retried_recent,
            "success_rate_24h": stats.success_rate_recent,
            "health": _health(entry["health"]),
            "latency_p95_24h": latency.unconfirmed.p95 if latency else None,
            "budget": _budget(budgets.get(stats.key)),
        })
    next_cursor = key_cursor(entries[-1]["stats"].key) if entries and more else None
    return {"items": items, "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.get("/streams/{stream_id}", response=StreamDetail, summary="One stream")
@on_replica
def stream_detail(request: HttpRequest, stream_id: str) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [])
    stream = Stream.objects.filter(stream_id=stream_id.strip().lower()[:64]).first()
    if stream is None:
        raise Http404("No stream with this id is known here.")
    now = timezone.now()
    urls = sorted(set(stream.webhook_urls) | ({stream.provider_webhook_url} - {""}))
    healths = url_health.url_health_now(now, urls)
    worst = url_health.checked(url_health.worst(healths.values()), stream.provider_status)
    day_ago = now - timedelta(hours=24)
    latencies = RollupWindow.between(day_ago, None, per_stream=True).latencies("stream_id", confirmed=False)
    latency = latencies.get((stream.stream_id,))
    return {
        "stream_id": stream.stream_id,
        "tag": stream.tag,
        "webhook_urls": urls,
        "chain_ids": list(stream.chain_ids or stream.provider_chain_ids or []),
        "provider_status": stream.provider_status,
        "provider_status_message": stream.provider_status_message,
        "provider_status_since": stream.provider_status_since,
        "health": _health(worst),
        "url_health": [
            h for h in (_health(url_health.checked(healths.get(u), stream.provider_status)) for u in urls) if h
        ],
        "stored": StreamPeriodRollup.objects.filter(stream_id=stream.stream_id).attempt_counts(),
        "latency": {"unconfirmed_24h": latency.unconfirmed} if latency else {},
        "budget": _budget(objectives.budgets(now, [stream.stream_id]).get(stream.stream_id)),
    }
