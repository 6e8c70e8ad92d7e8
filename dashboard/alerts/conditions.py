"""What each alert condition sees in the stored deliveries: the targets for which a rule holds right now.

Every function reads the Delivery table with bounded, indexed queries (the failed partial index on date,
stream_id+date, webhook_url+date) and returns only the targets where the rule holds; a target with an open
incident that is missing from the result has cleared. Windows have no upper bound: an upstream whose
clock runs ahead of ours (or a simulator running faster than real time) must not hide new failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Count, Max, Min, Q

from dashboard.actions import block_scan
from dashboard.alerts.models import AlertRule, Condition, TargetKind
from dashboard.deliveries import latency, pairs, trailing_counts, url_health
from dashboard.deliveries.models import Delivery, DeliveryQuerySet, ErrorGroup, HourlyRollup, Stream
from dashboard.deliveries.status import DeliveryStatus
from dashboard.expectations import objectives, volume
from dashboard.sources.models import Source
from dashboard.upstream.chains import find_chain

# Streams or URLs with no failure this recent cannot satisfy consecutive or error-state conditions.
FAILURE_LOOKBACK = timedelta(hours=32)
FIRST_FAILURES = 5
TOP_ERROR_GROUPS = 5


@dataclass
class Observation:
    """One target for which a rule holds, with the numbers the mail will quote."""

    target_kind: str
    target_key: str
    label: str = ""
    stream_id: str = ""
    webhook_url: str = ""
    failures: int = 0
    total: int | None = None
    # Failure rate (percent) or modelled success rate, depending on the condition.
    rate: float | None = None
    # Where the evidence starts: the window, or the oldest of the consecutive failures.
    since: datetime | None = None
    stale_for: timedelta | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def scoped(rule: AlertRule) -> DeliveryQuerySet:
    # A failing test webhook is the provider checking the URL, not a chain event that went undelivered.
    deliveries = Delivery.objects.chain_events()
    scope = rule.scope_filter()
    return deliveries if scope is None else deliveries.filter(**{scope[0]: scope[1]})


def observe(rule: AlertRule, now: datetime) -> list[Observation]:
    if rule.condition == Condition.ANY_FAILURE:
        return any_failure(rule, now)
    if rule.condition == Condition.FAILURE_RATE:
        return failure_rate(rule, now)
    if rule.condition == Condition.CONSECUTIVE:
        return consecutive(rule, now)
    if rule.condition == Condition.ERROR_STATE_RISK:
        return error_state_risk(rule, now)
    if rule.condition == Condition.POLLER_STALE:
        return poller_stale(rule, now)
    if rule.condition == Condition.PROVIDER_ERROR_STATE:
        return provider_error_state(rule, now)
    if rule.condition == Condition.CONFIRMATION_GAP:
        return confirmation_gap(rule, now)
    if rule.condition == Condition.LATENCY_P95:
        return latency_p95(rule, now)
    if rule.condition == Condition.QUIET_STREAM:
        return quiet_stream(rule, now)
    if rule.condition == Condition.MISSING_BLOCKS:
        return missing_blocks(rule, now)
    if rule.condition == Condition.SLO_BURN_FAST:
        return slo_burn(rule, now, objectives.FAST)
    if rule.condition == Condition.SLO_BURN_SLOW:
        return slo_burn(rule, now, objectives.SLOW)
    raise ValueError(f"unknown condition {rule.condition!r}")


def _label(tag: str, stream_id: str) -> str:
    return tag or stream_id[:8]


def any_failure(rule: AlertRule, now: datetime) -> list[Observation]:
    since = now - timedelta(minutes=rule.window_minutes)
    rows = (
        scoped(rule)
        .failed_attempt_since(since)
        .values("stream_id")
        .annotate(failures=Count("id"), tag=Max("tag"), webhook_url=Max("webhook_url"), first=Min("date"))
        .order_by("stream_id")
    )
    return [
        Observation(
            target_kind=TargetKind.STREAM,
            target_key=row["stream_id"],
            label=_label(row["tag"], row["stream_id"]),
            stream_id=row["stream_id"],
            webhook_url=row["webhook_url"],
            failures=row["failures"],
            since=since,
        )
        for row in rows
    ]


def failure_rate(rule: AlertRule, now: datetime) -> list[Observation]:
    since = now - timedelta(minutes=rule.window_minutes)
    failed = ~Q(status=DeliveryStatus.DELIVERED)
    # Only streams that failed in the window can exceed a threshold; the failed partial index finds them.
    candidates = list(
        scoped(rule)
        .failures()
        .filter(date__gte=since)
        .values_list("stream_id", flat=True)
        .distinct()
    )
    if not candidates:
        return []
    rows = (
        scoped(rule)
        .filter(stream_id__in=candidates, date__gte=since)
        .values("stream_id")
        .annotate(
            total=Count("id"),
            failures=Count("id", filter=failed),
            tag=Max("tag"),
            webhook_url=Max("webhook_url", filter=failed),
        )
        .order_by("stream_id")
    )
    found = []
    for row in rows:
        rate = 100.0 * row["failures"] / row["total"]
        if row["total"] >= rule.min_deliveries and rate > rule.threshold_percent:
            found.append(
                Observation(
                    target_kind=TargetKind.STREAM,
                    target_key=row["stream_id"],
                    label=_label(row["tag"], row["stream_id"]),
                    stream_id=row["stream_id"],
                    webhook_url=row["webhook_url"] or "",
                    failures=row["failures"],
                    total=row["total"],
                    rate=rate,
                    since=since,
                )
            )
    return found


def consecutive(rule: AlertRule, now: datetime) -> list[Observation]:
    n = max(1, rule.consecutive_failures)
    candidates = (
        scoped(rule)
        .failures()
        .filter(date__gte=now - FAILURE_LOOKBACK)
        .values_list("stream_id", flat=True)
        .distinct()
    )
    found = []
    for stream_id in sorted(set(candidates)):
        newest = list(
            scoped(rule)
            .filter(stream_id=stream_id)
            .order_by("-date", "-id")
            .values("status", "date", "tag", "webhook_url")[:n]
        )
        if len(newest) == n and all(row["status"] != DeliveryStatus.DELIVERED for row in newest):
            found.append(
                Observation(
                    target_kind=TargetKind.STREAM,
                    target_key=stream_id,
                    label=_label(newest[0]["tag"], stream_id),
                    stream_id=stream_id,
                    webhook_url=newest[0]["webhook_url"],
                    failures=n,
                    since=newest[-1]["date"],
                )
            )
    return found


def error_state_risk(rule: AlertRule, now: datetime) -> list[Observation]:
    """Webhook URLs whose replayed provider success rate (the streams page's model) is below the threshold."""
    urls = sorted(
        set(
            scoped(rule)
            .failures()
            .filter(date__gte=now - FAILURE_LOOKBACK)
            .values_list("webhook_url", flat=True)
            .distinct()
        )
    )
    if not urls:
        return []
    healths = url_health.url_health_now(now, urls)
    found = []
    for url in urls:
        health = healths.get(url)
        if health is None or health.rate >= rule.threshold_percent:
            continue
        newest = scoped(rule).filter(webhook_url=url).order_by("-date").values_list("stream_id", "tag").first()
        stream_id, tag = newest if newest is not None else ("", "")
        found.append(
            Observation(
                target_kind=TargetKind.WEBHOOK_URL,
                target_key=url,
                label=_label(tag, stream_id),
                stream_id=stream_id,
                webhook_url=url,
                failures=health.failed_attempts,
                total=health.attempts,
                rate=float(health.rate),
                since=HourlyRollup.hour_of(now - url_health.WINDOW),
            )
        )
    return found


# The gaps an incident's details list (the mail and the incident page), newest first.
GAPS_LISTED = 5


def confirmation_gap(rule: AlertRule, now: datetime) -> list[Observation]:
    """Streams with a block of the window a receiver acting only on confirmed deliveries would miss: its
    confirmed delivery never came after the chain's finality (plus CONFIRMATION_GRACE_SECONDS), or it is
    failing while the unconfirmed one was delivered. The Confirmation gaps page's query (deliveries/pairs.py),
    narrowed to the rule's scope; bounded like the page."""
    since = now - timedelta(minutes=rule.window_minutes)
    scope = rule.scope_filter()
    # No upper bound that matters (see the module's note on clocks): a day past now.
    gaps = pairs.confirmation_gaps(
        since, now + timedelta(days=1), grace=timedelta(seconds=settings.CONFIRMATION_GRACE_SECONDS), scope=scope
    )
    by_stream: dict[str, list[pairs.Gap]] = {}
    for gap in gaps:
        by_stream.setdefault(gap.unconfirmed.stream_id, []).append(gap)
    found = []
    for stream_id in sorted(by_stream):
        stream_gaps = by_stream[stream_id]
        newest = stream_gaps[0].delivery
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream_id,
                label=_label(newest.tag, stream_id),
                stream_id=stream_id,
                webhook_url=newest.webhook_url,
                failures=len(stream_gaps),
                since=since,
                extra={
                    "missing_confirmed": sum(1 for g in stream_gaps if g.kind == "missing"),
                    "failed_confirmed": sum(1 for g in stream_gaps if g.kind == "failed"),
                    "gaps": [
                        {
                            "kind": g.kind,
                            "block_number": g.unconfirmed.block_number,
                            "chain_id": g.unconfirmed.chain_id,
                            "unconfirmed_id": str(g.unconfirmed.pk),
                            "confirmed_id": str(g.confirmed.pk) if g.confirmed else None,
                            "date": g.unconfirmed.date.isoformat(),
                        }
                        for g in stream_gaps[:GAPS_LISTED]
                    ],
                },
            )
        )
    return found


# How far back the provider keeps history (published: up to 7 days, by plan): a run of failures is looked for
# no further.
PROVIDER_HISTORY = timedelta(days=7)


def provider_error_state(rule: AlertRule, now: datetime) -> list[Observation]:
    """Streams the provider itself has in `error` or `terminated`, as the last stream sync read them."""
    streams = Stream.objects.failing_at_provider().filter(source__enabled=True)
    streams = streams.in_scope(rule.scope_filter())
    found = []
    for stream in streams.order_by("stream_id"):
        url = stream.provider_webhook_url or (stream.webhook_urls[0] if stream.webhook_urls else "")
        # The failures that led the provider to stop the stream came before its status did: the incident's
        # impact counts from the start of the stream's current run of failures (within the provider's history
        # window), or from the status's start where none is stored.
        run_start = scoped(rule).for_stream(stream.stream_id).failing_run_start(now - PROVIDER_HISTORY)
        starts = [d for d in (stream.provider_status_since, run_start) if d is not None]
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream.stream_id,
                label=_label(stream.tag, stream.stream_id),
                stream_id=stream.stream_id,
                webhook_url=url,
                since=min(starts) if starts else None,
                extra={
                    "provider_status": stream.provider_status,
                    "status_since": stream.provider_status_since.isoformat() if stream.provider_status_since else None,
                    "provider_status_message": stream.provider_status_message[:500],
                },
            )
        )
    return found


def poller_stale(rule: AlertRule, now: datetime) -> list[Observation]:
    limit = timedelta(minutes=rule.stale_minutes)
    found = []
    for source in Source.objects.enabled().order_by("id"):
        reference = source.last_success_at or source.created_at
        if now - reference > limit:
            found.append(
                Observation(
                    target_kind=TargetKind.SOURCE,
                    target_key=str(source.pk),
                    label=source.name,
                    since=reference,
                    stale_for=now - reference,
                    extra={
                        "last_success_at": source.last_success_at.isoformat()
                        if source.last_success_at
                        else None,
                        "last_error": source.last_error_message[:500],
                    },
                )
            )
    return found


def host_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or url
    except ValueError:
        return url


_MASK = re.compile(r"<(url|address|hex|id|ip|host|duration|n)>")
_KEEP = {"n", "duration"}


def short_error(template: str, example: str) -> str:
    """The error template made readable: codes and timeouts from the example, hosts and addresses dropped.

    "connect ECONNREFUSED <ip>" gives "connect ECONNREFUSED"; "Request failed with status code <n>" with an
    example gives "Request failed with status code 500".
    """
    pieces = _MASK.split(template)
    # split() alternates literal text and mask names.
    pattern = "".join(re.escape(piece) if i % 2 == 0 else "(.+?)" for i, piece in enumerate(pieces))
    match = re.fullmatch(pattern, " ".join(example.split())) if example else None
    out = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            out.append(piece)
        elif piece in _KEEP and match:
            out.append(match.group((i + 1) // 2))
    text = " ".join("".join(out).split()).rstrip(" :,-")
    return text[:120] or template[:120]


def latency_p95(rule: AlertRule, now: datetime) -> list[Observation]:
    """Streams whose unconfirmed deliveries of the window had a p95 processing latency above the rule's seconds
    (with at least `min_deliveries` of them): the histogram of the window's whole hours from the hourly
    rollups, and of the partial hour at each end from the raw rows' latencies (`trailing_counts.trailing_latencies`)."""
    since = now - timedelta(minutes=rule.window_minutes)
    found = []
    for stream_id, (histogram, tag, url) in sorted(trailing_counts.trailing_latencies(since, now, rule.scope_filter()).items()):
        p = latency.Percentiles.of(histogram)
        if p.count < max(rule.min_deliveries, 1) or p.p95 is None or p.p95 <= rule.latency_seconds:
            continue
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream_id,
                label=_label(tag, stream_id),
                stream_id=stream_id,
                webhook_url=url,
                total=p.count,
                rate=p.p95,
                since=since,
                extra={"p50_seconds": p.p50, "p95_seconds": p.p95, "p99_seconds": p.p99,
                       "latency_seconds": rule.latency_seconds},
            )
        )
    return found


def quiet_stream(rule: AlertRule, now: datetime) -> list[Observation]:
    """Streams whose deliveries in a window ending now are improbably few for their own history
    (`expectations.volume`), past their cold start."""
    # A stream the provider does not have active is silent for that reason, which its own condition reports.
    streams = Stream.objects.active_at_provider().exclude(first_delivery_at=None).filter(source__enabled=True)
    streams = streams.in_scope(rule.scope_filter())
    rows = {s.stream_id: s for s in streams.only("stream_id", "tag", "webhook_urls")}
    found = []
    for stream_id, verdict in sorted(volume.verdicts(now, list(rows)).items()):
        if not verdict.quiet(rule.quiet_probability):
            continue
        stream = rows[stream_id]
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream_id,
                label=_label(stream.tag, stream_id),
                stream_id=stream_id,
                webhook_url=next(iter(stream.webhook_urls or []), ""),
                total=verdict.seen,
                rate=verdict.probability,
                since=verdict.since,
                extra={"expected": round(verdict.expected, 1), "seen": verdict.seen,
                       "probability": verdict.probability, "quiet_probability": rule.quiet_probability},
            )
        )
    return found


def slo_burn(rule: AlertRule, now: datetime, burn: objectives.Burn) -> list[Observation]:
    """Streams spending an objective's error budget at `burn`'s factor or faster over both its windows ending now
    (`expectations.objectives`), with at least `min_deliveries` deliveries in the long window."""
    found = []
    readings = objectives.burn_readings(now, burn, rule.scope_filter())
    labels = {
        s.stream_id: s for s in Stream.objects.filter(stream_id__in=list(readings)).only("stream_id", "tag", "webhook_urls")
    }
    for stream_id, reading in sorted(readings.items()):
        long_delivery = reading.delivery[0]
        if not reading.holds or long_delivery.total < max(rule.min_deliveries, 1):
            continue
        stream = labels.get(stream_id)
        burning = [name for name, burns in (("delivery", reading.delivery_burns), ("latency", reading.latency_burns))
                   if burns]
        pair = reading.delivery if reading.delivery_burns else reading.latency
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream_id,
                label=_label(stream.tag if stream else "", stream_id),
                stream_id=stream_id,
                webhook_url=next(iter(stream.webhook_urls or []), "") if stream else "",
                total=int(long_delivery.total),
                rate=pair[0].burn_rate,
                since=now - burn.long,
                extra={
                    "burn": burn.name,
                    "burn_windows": burn.describe(),
                    "objectives": burning,
                    "delivery_objective": reading.objective.describe_delivery(),
                    "latency_objective": reading.objective.describe_latency(),
                    "delivery_burn": [m.burn_rate for m in reading.delivery],
                    "latency_burn": [m.burn_rate for m in reading.latency],
                },
            )
        )
    return found


# The missing blocks an incident's details list (the mail and the incident page), oldest first.
MISSING_LISTED = 10


def missing_blocks(rule: AlertRule, now: datetime) -> list[Observation]:
    """Streams with blocks a completeness audit or a block scan previewed within the window, that the stream
    matched, and of which no delivery is stored (`actions.block_scan.missing_found_since`, the window page's reading
    of "missing"). A block re-sent and polled has its delivery stored, so the stream clears."""
    since = now - timedelta(minutes=rule.window_minutes)
    streams = Stream.objects.in_scope(rule.scope_filter())
    if rule.scope_filter() is None:
        found_by_stream = block_scan.missing_found_since(since)
    else:
        found_by_stream = block_scan.missing_found_since(since, streams.values_list("stream_id", flat=True))
    rows = {s.stream_id: s for s in streams.filter(stream_id__in=list(found_by_stream)).only(
        "stream_id", "tag", "webhook_urls", "provider_webhook_url")}
    found = []
    for stream_id, blocks in found_by_stream.items():
        stream = rows.get(stream_id)
        if stream is None:
            continue
        windows = sorted({b.window_id for b in blocks if b.window_id is not None})
        found.append(
            Observation(
                target_kind=TargetKind.STREAM,
                target_key=stream_id,
                label=_label(stream.tag, stream_id),
                stream_id=stream_id,
                webhook_url=stream.provider_webhook_url or next(iter(stream.webhook_urls or []), ""),
                failures=len(blocks),
                since=min((b.previewed_at for b in blocks if b.previewed_at), default=since),
                extra={
                    "missing_blocks": [
                        {"chain_id": b.chain_id, "block_number": b.block_number, "records": b.records,
                         "window_id": b.window_id}
                        for b in blocks[:MISSING_LISTED]
                    ],
                    "window_ids": windows,
                },
            )
        )
    return found


def describe(rule: AlertRule, observation: Observation, now: datetime) -> dict[str, Any]:
    """The evidence a mail quotes: error groups with counts, the first failures, counts and the headline."""
    details: dict[str, Any] = {
        "condition": rule.condition,
        "failures": observation.failures,
        "total": observation.total,
        "rate": observation.rate,
        "since": observation.since.isoformat() if observation.since else None,
        "host": host_of(observation.webhook_url) if observation.webhook_url else "",
        "error_groups": [],
        "first_failures": [],
        "error_summary": "",
        **observation.extra,
    }
    if observation.target_kind == TargetKind.SOURCE:
        details["stale_minutes"] = (
            int(observation.stale_for.total_seconds() // 60) if observation.stale_for else 0
        )
        return details
    if rule.condition == Condition.MISSING_BLOCKS:
        # Blocks never delivered, not failing deliveries: no error groups to quote.
        return details
    if rule.condition in (Condition.LATENCY_P95, Condition.QUIET_STREAM) or (
        rule.condition in (Condition.SLO_BURN_FAST, Condition.SLO_BURN_SLOW) and "delivery" not in details["objectives"]
    ):
        # Slow or quiet, not failing: no error groups to quote.
        return details
    failing = scoped(rule).failures()
    if observation.target_kind == TargetKind.STREAM:
        failing = failing.filter(stream_id=observation.stream_id)
    else:
        failing = failing.filter(webhook_url=observation.webhook_url)
    if observation.since is not None and rule.condition == Condition.ANY_FAILURE:
        failing = failing.failed_attempt_since(observation.since)
    elif observation.since is not None:
        failing = failing.filter(date__gte=observation.since)
    groups = list(
        failing.values("error_group")
        .annotate(count=Count("id"), example=Max("error_message"))
        .order_by("-count", "error_group")[:TOP_ERROR_GROUPS]
    )
    templates = dict(
        ErrorGroup.objects.filter(pk__in=[g["error_group"] for g in groups if g["error_group"]]).values_list(
            "pk", "template"
        )
    )
    details["error_groups"] = [
        {
            "id": g["error_group"],
            "template": templates.get(g["error_group"], g["example"]),
            "example": g["example"],
            "count": g["count"],
        }
        for g in groups
    ]
    if details["error_groups"]:
        top = details["error_groups"][0]
        details["error_summary"] = short_error(top["template"], top["example"])
    details["first_failures"] = [
        {
            "id": str(row["id"]),
            "date": row["date"].isoformat(),
            "stream_id": row["stream_id"],
            "tag": row["tag"],
            "webhook_url": row["webhook_url"],
            "status": row["status"],
            "retries": row["retries"],
            "block_number": row["block_number"],
            "error_message": row["error_message"][:500],
        }
        for row in failing.order_by("date", "id").values(
            "id",
            "date",
            "stream_id",
            "tag",
            "webhook_url",
            "status",
            "retries",
            "block_number",
            "error_message",
        )[:FIRST_FAILURES]
    ]
    return details


def headline(rule: AlertRule, observation: Observation, details: dict[str, Any]) -> str:
    """What and where in one line, without the status word: the mail subject and the incident summary."""
    if observation.target_kind == TargetKind.SOURCE:
        text = f"source {observation.label}: no successful poll for {details.get('stale_minutes', 0)} min"
        # Why it is silent (a rejected key, an unreachable host) is what the reader acts on.
        if details.get("last_error"):
            text += f" — {' '.join(details['last_error'].split())[:160]}"
        return text[:500]
    host = details["host"] or "?"
    if rule.condition == Condition.PROVIDER_ERROR_STATE:
        text = f"stream {observation.label}: {details.get('provider_status') or 'error'} at the provider"
        if details.get("provider_status_message"):
            text += f" — {' '.join(str(details['provider_status_message']).split())[:160]}"
        return text[:500]
    if rule.condition == Condition.LATENCY_P95:
        return (
            f"stream {observation.label}: p95 latency {details.get('p95_seconds') or 0:.0f} s (above "
            f"{details.get('latency_seconds')} s) over {rule.window_minutes} min, {observation.total} unconfirmed "
            f"deliveries to {host}"
        )[:500]
    if rule.condition == Condition.QUIET_STREAM:
        since = observation.since.strftime("%Y-%m-%d %H:%M UTC") if observation.since else "?"
        return (
            f"stream {observation.label}: {details.get('seen', 0)} deliveries since {since} where ~"
            f"{details.get('expected', 0):.0f} were expected (probability {details.get('probability', 0):.1g})"
        )[:500]
    if rule.condition in (Condition.SLO_BURN_FAST, Condition.SLO_BURN_SLOW):
        said = []
        for name in details.get("objectives", []):
            rates = details.get(f"{name}_burn") or []
            said.append(f"{name} budget burning at {rates[0] or 0:.1f}× ({rates[1] or 0:.1f}× in the short window)")
        return (
            f"stream {observation.label}: {' and '.join(said)} — {details.get('burn')} burn "
            f"({details.get('burn_windows')})"
        )[:500]
    if rule.condition == Condition.MISSING_BLOCKS:
        listed = details.get("missing_blocks") or []
        first = listed[0] if listed else {}
        chain = find_chain(first.get("chain_id")) if first else None
        blocks = "block" if observation.failures == 1 else "blocks"
        return (
            f"stream {observation.label}: {observation.failures} {blocks} it matched with no delivery stored"
            + (f", e.g. block {first['block_number']} on {chain.display_name if chain else first['chain_id']}" if first else "")
            + " (found by a completeness audit or a block scan)"
        )[:500]
    if rule.condition == Condition.CONFIRMATION_GAP:
        blocks = "block" if observation.failures == 1 else "blocks"
        return (
            f"stream {observation.label}: {observation.failures} {blocks} without a delivered confirmed delivery — "
            f"{details.get('missing_confirmed', 0)} missing after finality, "
            f"{details.get('failed_confirmed', 0)} failing while the unconfirmed one was delivered"
        )[:500]
    if rule.condition == Condition.ERROR_STATE_RISK:
        text = (
            f"stream {observation.label}: modelled success rate {observation.rate:.0f} % for {host} "
            f"(error state below {url_health.ERROR_BELOW} %)"
        )
    elif rule.condition == Condition.FAILURE_RATE:
        text = (
            f"stream {observation.label}: {observation.rate:.0f} % of {observation.total} deliveries "
            f"to {host} failed in {rule.window_minutes} min"
        )
    elif rule.condition == Condition.CONSECUTIVE:
        text = f"stream {observation.label}: {observation.failures} consecutive failed deliveries to {host}"
    else:
        noun = "delivery" if observation.failures == 1 else "deliveries"
        text = f"stream {observation.label}: {observation.failures} failed {noun} to {host}"
    if details["error_summary"]:
        text += f" — {details['error_summary']}"
    return text[:500]
