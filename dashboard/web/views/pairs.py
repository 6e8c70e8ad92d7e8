"""Blocks a receiver acting only on confirmed deliveries would miss: the confirmed delivery never came
after the chain's finality, or it is failing while the unconfirmed one was delivered."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.pairs import DEFAULT_FINALITY, GAPS_MAX, SCAN_ROWS, confirmation_gaps
from dashboard.replica import reads_replica
from dashboard.upstream.chains import CHAINS
from dashboard.web.forms import PairGapsForm
from dashboard.web.views.common import bad_filters


@viewer_required
@reads_replica
def confirmation_gaps_page(request: HttpRequest) -> HttpResponse:
    form = PairGapsForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Confirmation gaps", nav="deliveries")
    window = form.cleaned_data["window"]
    grace = timedelta(seconds=settings.CONFIRMATION_GRACE_SECONDS)
    gaps = confirmation_gaps(window.start, window.end or timezone.now(), grace=grace)
    context = {
        "nav": "deliveries",
        "form": form,
        "window": window,
        "gaps": gaps,
        "missing": sum(1 for g in gaps if g.kind == "missing"),
        "failed": sum(1 for g in gaps if g.kind == "failed"),
        "limit": GAPS_MAX,
        "scan": SCAN_ROWS,
        "grace": settings.CONFIRMATION_GRACE_SECONDS,
        "finality": [(c.display_name, c.finality_seconds) for c in CHAINS],
        "default_finality": DEFAULT_FINALITY.total_seconds(),
    }
    return render(request, "web/confirmation_gaps.html", context)
