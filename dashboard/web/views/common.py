"""Helpers every page uses: the 400 answer for bad filters and the live-refresh partial switch."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.web.forms import form_errors

LIVE_HEADER = "X-Live-Refresh"


def bad_filters(request: HttpRequest, form: forms.Form | None, *, title: str, messages: list[str] | None = None,
                nav: str = "") -> HttpResponse:
    """400 with every message, the page's title and a link back to the page without filters."""
    lines = messages if messages is not None else form_errors(form) if form is not None else []
    context = {"title": title, "errors": lines, "reset_url": request.path, "nav": nav}
    return render(request, "web/bad_request.html", context, status=400)


def is_live_refresh(request: HttpRequest) -> bool:
    return request.headers.get(LIVE_HEADER) == "1"


def render_live(request: HttpRequest, page: str, partial: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its partial when the page's own script asks for a refresh."""
    response = render(request, partial if is_live_refresh(request) else page, context)
    # The partial and the page share a URL; caches must keep them apart.
    response["Vary"] = LIVE_HEADER
    response["Cache-Control"] = "no-store"
    return response
