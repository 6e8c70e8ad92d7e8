from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from dashboard.sources.models import Source


def sync_banner(request: HttpRequest) -> dict[str, Any]:
    """Sources whose polling is failing or stale, for the banner on every page."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"sync_problems": Source.objects.needing_attention()}
