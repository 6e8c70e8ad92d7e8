"""A stream's objectives and completeness, as its page shows them: the error budget and the burn rates of both
conditions (`web.views.streams.objectives_panel`); its outage windows and completeness audits, each with its
latest scan (`web.templatetags.completeness.latest_scans`); one window with its scans' progress, the missing
blocks found, the re-sends and their verification (`web.views.completeness.window_findings`)."""

from typing import Any

from django.db.models import Q
from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Query, Router

from dashboard.actions import block_scan
from dashboard.actions.audit import skip_reason
from dashboard.actions.models import BlockScan
from dashboard.api.pages import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    int_cursor,
    key_cursor,
    next_url,
    on_replica,
    read_int_cursor,
    read_key_cursor,
)
from dashboard.api.problems import Problem, refuse_unknown
from dashboard.api.schemas import (
    MeasureOut,
    MissingBlockPage,
    ObjectivesOut,
    ScanOut,
    WindowDetail,
    WindowPage,
)
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries.completeness import windows_of
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind
from dashboard.expectations import objectives
from dashboard.web.templatetags.completeness import latest_scans
from dashboard.web.views.completeness import window_findings
from dashboard.web.views.streams import objectives_panel

router = Router(tags=["completeness"])


def _stream(stream_id: str) -> Stream:
    stream = Stream.objects.filter(stream_id=stream_id.strip().lower()[:64]).first()
    if stream is None:
        raise Http404("No stream with this id is known here.")
    return stream


def _measure(measure: objectives.Measure) -> MeasureOut:
    return MeasureOut(
        target=measure.target, total=measure.total, bad=measure.bad, good_percent=measure.good_percent,
        budget_left=measure.budget_left, burn_rate=measure.burn_rate,
    )


@router.get("/streams/{stream_id}/objectives", response=ObjectivesOut, summary="A stream's error budget and burn rates")
@on_replica
def stream_objectives(request: HttpRequest, stream_id: str) -> dict[str, Any]:
    """The stream page's objectives: the stream's own or the default (`own`), the budget over the last
    SLO_WINDOW_DAYS days of whole hours less its maintenance hours (`budget_left`: 1 untouched, below 0
    overspent), and the fast and slow burn-rate conditions' two windows each (long, short), with whether
    each holds."""
    allow(request, VIEW)
    refuse_unknown(request, [])
    stream = _stream(stream_id)
    panel = objectives_panel(stream, timezone.now())
    budget = panel.budget
    objective = panel.objective
    return {
        "stream_id": stream.stream_id,
        "objective": {
            "delivery": objective.delivery, "delivery_target": objective.delivery_target,
            "latency_seconds": objective.latency_seconds, "latency_target": objective.latency_target,
            "own": objective.own,
        },
        "budget": None if budget is None else {
            "since": budget.since, "until": budget.until, "left_out_hours": budget.left_out,
            "delivery": _measure(budget.delivery), "latency": _measure(budget.latency),
            "least_left": budget.least_left,
        },
        "burns": [
            {
                "name": reading.burn.name, "long_seconds": int(reading.burn.long.total_seconds()),
                "short_seconds": int(reading.burn.short.total_seconds()), "factor": reading.burn.factor,
                "holds": reading.holds, "delivery_burns": reading.delivery_burns,
                "latency_burns": reading.latency_burns,
                "delivery": [_measure(m) for m in reading.delivery],
                "latency": [_measure(m) for m in reading.latency],
            }
            for reading in panel.burns
        ],
    }


def _scan(scan: BlockScan | None) -> ScanOut | None:
    if scan is None:
        return None
    return ScanOut(
        id=scan.pk, state=scan.state, requested_by=scan.requested_by_name, created_at=scan.created_at,
        confirmed_at=scan.confirmed_at, started_at=scan.started_at, finished_at=scan.finished_at,
        planned=scan.planned, previewed=scan.previewed, matched=scan.matched, percent=scan.percent,
        message=scan.message,
    )


def _window(window: OutageWindow, stream: Stream, latest: BlockScan | None) -> dict[str, Any]:
    return {
        "id": window.pk, "stream_id": stream.stream_id, "kind": window.kind, "label": window.label,
        "start": window.start, "end": window.end, "marked_by": window.marked_by_name,
        "created_at": window.created_at, "latest_scan": _scan(latest),
    }


@router.get("/streams/{stream_id}/windows", response=WindowPage, summary="A stream's outage windows or audits")
@on_replica
def stream_windows(
    request: HttpRequest,
    stream_id: str,
    kind: str = Query("outage", pattern="^(outage|audit)$", description="`outage` (a provider status other than "
                      "active, or marked by a person; the default) or `audit` (a day's completeness audit)"),
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    """The stream page's Completeness section: newest first, each with its latest scan (state and progress);
    `audit_skipped` says why the completeness audit leaves the stream out, if it does."""
    allow(request, VIEW)
    refuse_unknown(request, ["kind", "limit", "cursor"])
    stream = _stream(stream_id)
    windows = windows_of(stream)
    windows = windows.filter(kind=WindowKind.AUDIT) if kind == "audit" else windows.exclude(kind=WindowKind.AUDIT)
    position = read_int_cursor(cursor)
    if position is not None:
        start, pk = position
        windows = windows.filter(Q(start__lt=start) | Q(start=start, pk__lt=pk))
    rows = list(windows[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    latest = latest_scans(rows)
    next_cursor = int_cursor(rows[-1].start, rows[-1].pk) if rows and more else None
    return {
        "items": [_window(w, stream, latest.get(w.pk)) for w in rows],
        "audit_skipped": skip_reason(stream),
        "next_cursor": next_cursor,
        "next": next_url(request, next_cursor),
    }


def _outage_window(window_id: int) -> OutageWindow:
    window = OutageWindow.objects.select_related("stream", "stream__source").filter(pk=window_id).first()
    if window is None:
        raise Http404("No outage window with this number.")
    return window


def _missing(block: block_scan.MissingBlock) -> dict[str, Any]:
    return {"chain_id": block.chain_id, "block_number": block.block_number, "records": block.records,
            "block_time": block.block_time, "previewed_at": block.previewed_at}


@router.get("/windows/{int:window_id}", response=WindowDetail, summary="An outage window: scans, missing blocks, recovery")
@on_replica
def window_detail(request: HttpRequest, window_id: int) -> dict[str, Any]:
    """The window page: its latest scans (newest first; `chains` are the newest's ranges and cursors), the
    ranges a new scan would preview when none is live or done (`planned_ranges`, or `placing_error` saying
    why they cannot be placed), the blocks the stream matched and has no delivery of (`missing_count`, the first
    500 in `missing`, by chain and block), the re-send actions and their verification (`recovery`: blocks
    re-sent and back in the history, those still missing named)."""
    allow(request, VIEW)
    refuse_unknown(request, [])
    window = _outage_window(window_id)
    found = window_findings(window)
    recovery = found["recovery"]
    return {
        **_window(window, window.stream, found["scan"]),
        "scans": [_scan(scan) for scan in found["scans"]],
        "chains": [
            {"chain_id": c.chain_id, "first_block": c.first_block, "last_block": c.last_block,
             "next_block": c.next_block, "blocks": c.blocks, "placed_by": c.placed_by}
            for c in found["chains"]
        ],
        "planned_ranges": [
            {"chain_id": r.chain_id, "first": r.first, "last": r.last, "blocks": r.blocks, "placed_by": r.placed_by}
            for r in found["ranges"]
        ],
        "placing_error": found["placing_error"],
        "missing_count": found["missing_count"],
        "missing": [_missing(m) for m in found["missing"]],
        "resends": [action.pk for action in found["resends"]],
        "recovery": None if recovery is None else {
            "asked": recovery.asked, "recovered": recovery.recovered, "complete": recovery.complete,
            "still_missing": [
                {"chain_id": chain, "block_number": block, "state": state}
                for chain, block, state in recovery.still_missing
            ],
        },
    }


@router.get("/windows/{int:window_id}/missing-blocks", response=MissingBlockPage,
            summary="Every missing block of a window's latest scan, paged")
@on_replica
def window_missing_blocks(
    request: HttpRequest,
    window_id: int,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=100, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    """The blocks the window's latest scan found the stream matched and of which no delivery is stored now
    (`actions.block_scan.missing_blocks`, as on the window page), by chain and block, all of them page by page."""
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    window = _outage_window(window_id)
    scan = window.scans.first()
    missing = block_scan.missing_blocks(scan) if scan is not None and scan.previewed else []
    start = 0
    after = read_key_cursor(cursor)
    if after is not None:
        chain, _, number = after.rpartition(":")
        if not number.isdigit():
            raise Problem(400, "cursor: this cursor is not valid; start again without it.", kind="invalid-parameter")
        start = sum(1 for m in missing if (m.chain_id, m.block_number) <= (chain, int(number)))
    shown = missing[start : start + limit]
    more = start + limit < len(missing)
    next_cursor = key_cursor(f"{shown[-1].chain_id}:{shown[-1].block_number}") if shown and more else None
    return {
        "scan_id": scan.pk if scan is not None else None,
        "count": len(missing),
        "items": [_missing(m) for m in shown],
        "next_cursor": next_cursor,
        "next": next_url(request, next_cursor),
    }
