"""The maintenance windows: those active now and the next occurrence of each (edited in the admin)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.expectations.maintenance import UPCOMING, schedule


@viewer_required
def maintenance_list(request: HttpRequest) -> HttpResponse:
    active, upcoming = schedule(timezone.now())
    context = {
        "nav": "streams",
        "active": active,
        "upcoming": upcoming,
        "upcoming_days": UPCOMING.days,
        "can_edit": request.user.has_perm("expectations.change_maintenancewindow"),
    }
    return render(request, "web/maintenance.html", context)
