"""The streams: one row each with recent success, failures, retries, our estimate of the provider's health rule
and the provider's own status; and one stream's page, where it can be reactivated or paused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.actions.models import ProviderAction
from dashboard.actions.services import can_act
from dashboard.deliveries import url_health
from dashboard.deliveries.latency import Latencies, Percentiles
from dashboard.deliveries.links import deliveries_list_query
from dashboard.deliveries.models import Delivery, HourlyRollup, Stream, StreamPeriodRollup
from dashboard.deliveries.rollup_window import RollupWindow
from dashboard.expectations import objectives
from dashboard.replica import reads_replica
from dashboard.upstream.chains import find_chain
from dashboard.web.charts import Sparkline, sparkline
from dashboard.web.forms import RangeForm, Window
from dashboard.web.latency_panel import exact_per_stream
from dashboard.web.latency_panel import read as latency_panel_read
from dashboard.web.stats import SliceStats, group_rows
from dashboard.web.views.common import bad_filters


class StreamEntry(TypedDict):
    stats: SliceStats
    last_delivery: datetime | None
    urls: list[tuple[str, url_health.UrlHealth | None]]
    health: url_health.UrlHealth | None
    row: Stream | None
    disagreement: str
    latency: Latencies | None


def stream_entries(now: datetime) -> list[StreamEntry]:
    """Every stream with a delivery within HISTORY_RETENTION_DAYS, worst health first: the Streams page's rows
    (and the API's)."""
    day_ago = HourlyRollup.hour_of(now - timedelta(hours=24))
    # Streams silent for longer than raw history is kept are gone from every other page too.
    kept = now - timedelta(days=settings.HISTORY_RETENTION_DAYS)
    rows = RollupWindow.between(kept, None, split_at=day_ago, per_stream=True).by_dimensions(
        "stream_id", "tag", "webhook_url", "chain_id"
    )
    streams = group_rows(rows, "stream_id")
    last_dates = Delivery.objects.last_delivery_dates(streams)
    health = url_health.url_health_now(now)
    # The latency column: the same 24 hours as the recent counts, from the rollups' histograms; the smallest streams'
    # percentiles read exactly from their rows (latency_panel.exact_per_stream).
    latencies = exact_per_stream(
        RollupWindow.between(day_ago, None, per_stream=True).latencies("stream_id", confirmed=False), day_ago
    )

    stream_rows = {row.stream_id: row for row in Stream.objects.filter(stream_id__in=list(streams))}
    entries: list[StreamEntry] = []
    for stats in streams.values():
        healths = [health[url] for url in sorted(stats.urls) if url in health]
        row = stream_rows.get(stats.key)
        worst = url_health.checked(url_health.worst(healths), row.provider_status if row else "")
        entries.append(
            {
                "stats": stats,
                "last_delivery": last_dates.get(stats.key),
                "urls": [(url, health.get(url)) for url in sorted(stats.urls)],
                "health": worst,
                "row": row,
                "disagreement": row.disagrees_with(worst.estimate_state if worst else None) if row else "",
                "latency": latencies.get((stats.key,)),
            }
        )
    order = {"error": 0, "at-risk": 1, "ok": 2}
    entries.sort(key=lambda e: (order[e["health"].state] if e["health"] else 3, e["stats"].label, e["stats"].key))
    return entries


@viewer_required
@reads_replica
def stream_list(request: HttpRequest) -> HttpResponse:
    entries = stream_entries(timezone.now())
    order = ("error", "at-risk", "ok")
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
        "slo_days": settings.SLO_WINDOW_DAYS,
        "horizon": url_health.WARN_HORIZON_HOURS,
        # Counted over every known stream: a stream the provider stopped is silent here, so may have no row.
        "down_at_provider": Stream.objects.failing_at_provider().count(),
    }
    return render(request, "web/streams.html", context)


@viewer_required
@reads_replica
def stream_detail(request: HttpRequest, stream_id: str) -> HttpResponse:
    """One stream: the provider's status beside our estimate, its counts beside ours, and what can be done."""
    stream = Stream.objects.select_related("source").filter(stream_id=stream_id.strip().lower()[:64]).first()
    if stream is None:
        raise Http404("No stream with this id is known here.")
    now = timezone.now()
    form = StreamRangeForm(request.GET, now=now)
    if not form.is_valid():
        return bad_filters(request, form, title="Stream", nav="streams")
    urls = sorted(set(stream.webhook_urls) | ({stream.provider_webhook_url} - {""}))
    healths = url_health.url_health_now(now, urls)
    worst = url_health.checked(url_health.worst(healths.values()), stream.provider_status)
    # The whole history's counts from its period rows, which sum its hours (ingest keeps the current period's too;
    # retention drops a period once all its hours are gone).
    stored = StreamPeriodRollup.objects.filter(stream_id=stream.stream_id).attempt_counts()
    context = {
        "nav": "streams",
        "stream": stream,
        "urls": [(url, url_health.checked(healths.get(url), stream.provider_status)) for url in urls],
        "health": worst,
        "disagreement": stream.disagrees_with(worst.estimate_state if worst else None),
        "stored": stored,
        "comparison": compare_counts(stream, stored),
        "actions": list(ProviderAction.objects.requested().for_stream(stream.stream_id)[:10]),
        "can_act": can_act(request.user),
        "can_audit": request.user.has_perm("actions.view_provideraction"),
        "failing_query": deliveries_list_query(stream=stream.stream_id, status="failing"),
        "history_days": settings.HISTORY_RETENTION_DAYS,
        "error_below": url_health.ERROR_BELOW,
        "latency": latency_panel(stream, form.cleaned_data["window"]),
        "objectives": objectives_panel(stream, now),
        "slo_days": settings.SLO_WINDOW_DAYS,
    }
    return render(request, "web/stream.html", context)


@dataclass(frozen=True)
class ObjectivesPanel:
    """The stream page's objectives: the budget over the objectives' window and the burn rates of both conditions."""

    budget: objectives.Budget | None
    objective: objectives.Objective
    burns: list[objectives.BurnReading]


def objectives_panel(stream: Stream, now: datetime) -> ObjectivesPanel:
    budget = objectives.budgets(now, [stream.stream_id]).get(stream.stream_id)
    objective = budget.objective if budget else objectives.objectives([stream.stream_id])[stream.stream_id]
    scope = ("stream_id", stream.stream_id)
    burns = [
        objectives.burn_readings(now, burn, scope).get(stream.stream_id) or objectives.BurnReading.idle(
            stream.stream_id, objective, burn
        )
        for burn in (objectives.FAST, objectives.SLOW)
    ]
    return ObjectivesPanel(budget, objective, burns)


class StreamRangeForm(RangeForm):
    """The stream page's window (its latency panel)."""

    default_range = "7d"


@dataclass(frozen=True)
class LatencyPanel:
    """A stream's latency over a window: the percentiles, the expected confirmed latency of each of its chains
    (confirmations × block time), p95 over time, and the links to its slowest deliveries."""

    window: Window
    latency: Latencies
    finality: list[tuple[str, int]]
    step: timedelta
    unconfirmed_p95: Sparkline
    confirmed_p95: Sparkline
    peaks: tuple[float, float]
    slowest_unconfirmed: str
    slowest_confirmed: str
    exact: bool = False
    presets: tuple[str, ...] = ("24h", "7d", "30d")

    @property
    def step_seconds(self) -> float:
        return self.step.total_seconds()

    @property
    def rows(self) -> list[tuple[str, Percentiles, Sparkline, float, str]]:
        return [
            ("Unconfirmed", self.latency.unconfirmed, self.unconfirmed_p95, self.peaks[0], self.slowest_unconfirmed),
            ("Confirmed", self.latency.confirmed, self.confirmed_p95, self.peaks[1], self.slowest_confirmed),
        ]


def latency_panel(stream: Stream, window: Window) -> LatencyPanel:
    """The stream's slice of the latency read the timeline's panel makes too (`web.latency_panel`)."""
    read = latency_panel_read(window, {"stream_id": stream.stream_id})
    unconfirmed = [round((t.unconfirmed.p95 or 0) * 1000) for _bucket, t in read.over_time]
    confirmed = [round((t.confirmed.p95 or 0) * 1000) for _bucket, t in read.over_time]
    chains = [chain for chain in map(find_chain, stream.chain_ids or stream.provider_chain_ids) if chain]
    return LatencyPanel(
        window=window,
        latency=read.latency,
        finality=[(chain.display_name, chain.finality_seconds) for chain in chains],
        step=read.step,
        unconfirmed_p95=sparkline(unconfirmed, width=240, height=36),
        confirmed_p95=sparkline(confirmed, width=240, height=36),
        peaks=(max(unconfirmed, default=0) / 1000, max(confirmed, default=0) / 1000),
        slowest_unconfirmed=read.slowest_unconfirmed,
        slowest_confirmed=read.slowest_confirmed,
        exact=read.exact,
    )


def compare_counts(stream: Stream, stored: dict[str, int]) -> list[str]:
    """Why the provider's counts and ours differ, in sentences; empty when the provider's are not known."""
    if stream.stats_delivered is None or stream.stats_failed is None:
        return []
    notes: list[str] = []
    delivered_gap = stream.stats_delivered - stored["delivered"]
    failed_gap = stream.stats_failed - stored["failed_attempts"]
    if delivered_gap == 0 and failed_gap == 0:
        return ["Every attempt the provider counted is in our history: nothing was missed."]
    if delivered_gap > 0 or failed_gap > 0:
        notes.append(
            f"The provider counted {max(delivered_gap, 0):,} more successful and {max(failed_gap, 0):,} more "
            "failed attempts than we hold. It counts since the stream was created; we hold what its history "
            "showed since we started polling (it keeps at most 7 days), less what our retention "
            f"({settings.HISTORY_RETENTION_DAYS} days of deliveries) removed."
        )
    if delivered_gap < 0 or failed_gap < 0:
        notes.append(
            "We hold more attempts than the provider counted: our attempts are inferred from each delivery's "
            "retry count, and a retry the provider made after our last read is counted there first."
        )
    return notes
