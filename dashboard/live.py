"""Live refresh, for every page that has it: the page's script asks its own URL again with one header,
and the view answers only the server-rendered partial the page includes.

Both the dashboard pages (web) and the lookup pages use this module; it imports no app, so neither
app imports the other for it. The browser half is dashboard/web/static/dashboard/live.js.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

# Sent by live.js with the value "1"; echoed on an answer that is the partial, so the script never
# swaps in a login page, an error page or a form to fix.
LIVE_HEADER = "X-Live-Refresh"


def is_live_refresh(request: HttpRequest) -> bool:
    return request.headers.get(LIVE_HEADER) == "1"


def render_live(
    request: HttpRequest, page: str, partial: str | None, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """The whole page, or only its partial when the page's own script asks for a refresh.

    `partial=None` answers the page even to a refresh: there is nothing to refresh (an empty or
    invalid form), and the script, seeing no echoed header, leaves the page as it is.
    """
    if partial is not None and is_live_refresh(request):
        response = render(request, partial, context, status=status)
        response[LIVE_HEADER] = "1"
    else:
        response = render(request, page, context, status=status)
    # The partial and the page share a URL; caches must keep them apart. Live data is never stored:
    # upstream answers have their own short Redis cache, and the dashboard's tables change by the minute.
    patch_vary_headers(response, (LIVE_HEADER,))
    response["Cache-Control"] = "private, no-store"
    return response
