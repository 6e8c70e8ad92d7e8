"""The stream page's Completeness section, rendered from the stream: its outage windows and completeness audits
(newest first) with their latest scan, why the audit leaves the stream out (if it does), and the form to mark a
window by hand."""

from __future__ import annotations

from typing import Any

from django import template

from dashboard.actions.audit import skip_reason
from dashboard.actions.block_scan import can_scan
from dashboard.actions.models import BlockScan
from dashboard.deliveries.completeness import windows_of
from dashboard.deliveries.models import OutageWindow, Stream, WindowKind

register = template.Library()

WINDOWS_SHOWN = 20
# Audits come daily: the latest few, listed apart so that they never push an outage off the list.
AUDITS_SHOWN = 7


def latest_scans(windows: list[OutageWindow]) -> dict[int, BlockScan]:
    """Each window's newest scan, by window id (the stream page's lists and the API's), in one query."""
    latest: dict[int, BlockScan] = {}
    for scan in BlockScan.objects.filter(window__in=windows).order_by("window_id", "-created_at", "-id"):
        latest.setdefault(scan.window_id, scan)
    return latest


@register.inclusion_tag("web/_completeness.html", takes_context=True)
def completeness_section(context: template.Context, stream: Stream) -> dict[str, Any]:
    windows = list(windows_of(stream).exclude(kind=WindowKind.AUDIT)[:WINDOWS_SHOWN])
    audits = list(windows_of(stream).filter(kind=WindowKind.AUDIT)[:AUDITS_SHOWN])
    latest = latest_scans(windows + audits)
    for window in windows + audits:
        window.latest_scan = latest.get(window.pk)  # type: ignore[attr-defined]
    request = context.get("request")
    return {
        "stream": stream,
        "windows": windows,
        "audits": audits,
        "audit_skipped": skip_reason(stream),
        "can_scan": request is not None and can_scan(request.user),
        "csrf_token": context.get("csrf_token"),
    }
