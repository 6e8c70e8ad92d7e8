"""A stream's completeness: its outage windows, a window's missing blocks found by a block scan (prepare, confirm
with its cost, progress, result), re-sent in bulk (the action pages confirm it) and verified after the next poll.

Scans spend the provider's budget: they need the `act_at_provider` permission (not PROVIDER_WRITES: a preview
writes nothing). Re-sends are actions at the provider and need both. Bad input answers 400 with a message.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypedDict

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_POST

from dashboard.accounts.access import viewer_required
from dashboard.actions import block_scan, services
from dashboard.actions.models import SCAN_LIVE, BlockScan, BlockScanChain, ProviderAction, ScanState
from dashboard.actions.tasks import run_block_scan_task
from dashboard.deliveries.completeness import ChainRange, WindowRefused, chain_ranges, mark_window
from dashboard.deliveries.models import OutageWindow, Stream
from dashboard.live import render_live
from dashboard.web.forms import form_errors

MISSING_SHOWN = 500


class MarkWindowForm(forms.Form):
    start = forms.DateTimeField(help_text="UTC, e.g. 2026-03-02 11:54")
    end = forms.DateTimeField(help_text="UTC")
    reason = forms.CharField(max_length=200, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("start", "end"):
            value = data.get(name)
            if isinstance(value, datetime):
                data[name] = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        return data


def _refuse(request: HttpRequest, title: str, message: str | list[str]) -> HttpResponse:
    errors = message if isinstance(message, list) else [message]
    return render(request, "web/action_refused.html", {"title": title, "errors": errors}, status=400)


def _require_scan(request: HttpRequest) -> None:
    if not block_scan.can_scan(request.user):
        raise PermissionDenied("Finding missing blocks spends the provider's budget: it needs the permission to act "
                               "at the provider.")


def _window(pk: int) -> OutageWindow:
    window = OutageWindow.objects.select_related("stream", "stream__source").filter(pk=pk).first()
    if window is None:
        raise Http404("No outage window with this number.")
    return window


def _scan(pk: int) -> BlockScan:
    scan = BlockScan.objects.select_related("window", "window__stream").filter(pk=pk).first()
    if scan is None:
        raise Http404("No block scan with this number.")
    return scan


class WindowFindings(TypedDict):
    scans: list[BlockScan]
    scan: BlockScan | None
    chains: list[BlockScanChain]
    ranges: list[ChainRange]
    planned: int
    placing_error: str
    missing: list[block_scan.MissingBlock]
    missing_count: int
    resends: list[ProviderAction]
    recovery: block_scan.Recovery | None


def window_findings(window: OutageWindow) -> WindowFindings:
    """An outage window's latest scans (the newest first) with the newest one's chains, the blocks a new scan would
    preview (when none is live or done), the missing blocks found (the first MISSING_SHOWN), the re-sends and
    their verification: the window page's (and the API's)."""
    scans = list(window.scans.all()[:5])
    scan = scans[0] if scans else None
    ranges, placing_error = [], ""
    if scan is None or scan.state in (ScanState.CANCELLED, ScanState.EXPIRED, ScanState.FAILED):
        try:
            ranges = chain_ranges(window.stream, window.start, window.end or datetime.now(UTC) - block_scan.SETTLE)
        except WindowRefused as exc:
            placing_error = str(exc)
    missing = block_scan.missing_blocks(scan) if scan is not None and scan.previewed else []
    return {
        "scans": scans,
        "scan": scan,
        "chains": list(scan.chains.all()) if scan is not None else [],
        "ranges": ranges,
        "planned": sum(r.blocks for r in ranges),
        "placing_error": placing_error,
        "missing": missing[:MISSING_SHOWN],
        "missing_count": len(missing),
        "resends": list(ProviderAction.objects.filter(scan=scan).order_by("-created_at")[:5]) if scan else [],
        "recovery": block_scan.recovery(scan) if scan is not None else None,
    }


@viewer_required
def outage_window(request: HttpRequest, pk: int) -> HttpResponse:
    window = _window(pk)
    findings = window_findings(window)
    scan = findings["scan"]
    context: dict[str, Any] = {
        "nav": "streams",
        "window": window,
        "stream": window.stream,
        **findings,
        "budget_left": block_scan.budget_left(),
        "can_scan": block_scan.can_scan(request.user),
        "can_act": services.can_act(request.user),
        "live": scan is not None and scan.state in SCAN_LIVE,
    }
    return render_live(request, "web/outage_window.html", "web/_outage_window_partial.html", context)


@viewer_required
@require_POST
def window_mark(request: HttpRequest, stream_id: str) -> HttpResponse:
    _require_scan(request)
    stream = Stream.objects.filter(stream_id=stream_id.strip().lower()[:64]).first()
    if stream is None:
        raise Http404("No stream with this id is known here.")
    form = MarkWindowForm(request.POST)
    if not form.is_valid():
        return _refuse(request, "Mark an outage window", form_errors(form))
    data = form.cleaned_data
    try:
        window = mark_window(stream, data["start"], data["end"], data["reason"], request.user.get_username())
    except WindowRefused as exc:
        return _refuse(request, "Mark an outage window", str(exc))
    return HttpResponseRedirect(window.get_absolute_url())


@viewer_required
@require_POST
def window_scan(request: HttpRequest, pk: int) -> HttpResponse:
    _require_scan(request)
    window = _window(pk)
    try:
        block_scan.prepare_scan(request.user, window)
    except WindowRefused as exc:
        return _refuse(request, "Find missing blocks", str(exc))
    return HttpResponseRedirect(window.get_absolute_url())


@viewer_required
@require_POST
def scan_confirm(request: HttpRequest, pk: int) -> HttpResponse:
    _require_scan(request)
    scan = _scan(pk)
    try:
        block_scan.confirm_scan(scan, queue=run_block_scan_task.delay)
    except WindowRefused as exc:
        return _refuse(request, "Find missing blocks", str(exc))
    return HttpResponseRedirect(scan.window.get_absolute_url())


@viewer_required
@require_POST
def scan_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    _require_scan(request)
    scan = _scan(pk)
    block_scan.cancel_scan(scan)
    return HttpResponseRedirect(scan.window.get_absolute_url())


@viewer_required
@require_POST
def scan_resend(request: HttpRequest, pk: int) -> HttpResponse:
    """The scan's missing blocks, as they read now, into a DRAFT re-send; the action page confirms it."""
    if not services.writes_enabled():
        raise PermissionDenied("Actions at the provider are switched off on this installation (PROVIDER_WRITES).")
    if not services.can_act(request.user):
        raise PermissionDenied("You may not act at the provider.")
    scan = _scan(pk)
    if scan.state != ScanState.DONE:
        return _refuse(request, "Re-send missing blocks", "Wait for the scan to finish: its list is not complete yet.")
    missing = block_scan.missing_blocks(scan)
    try:
        action = services.prepare_resend_blocks(request.user, scan, [(m.chain_id, m.block_number) for m in missing])
    except services.ActionRefused as exc:
        return _refuse(request, "Re-send missing blocks", str(exc))
    return HttpResponseRedirect(action.get_absolute_url())
