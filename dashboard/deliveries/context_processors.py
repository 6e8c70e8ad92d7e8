from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def sync_banner(request: HttpRequest) -> dict[str, Any]:
    """Sources whose polling is failing or stale, for the banner on every page."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    from dashboard.deliveries.sync import sources_needing_attention

    return {"sync_problems": sources_needing_attention()}
