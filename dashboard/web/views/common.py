"""Helpers every dashboard page uses: the 400 answer for bad filters, and the live-refresh render."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

# Live refresh has one home, shared with the lookup pages; the pages here reach it through this module.
from dashboard.live import render_live as render_live
from dashboard.web.forms import form_errors


def bad_filters(
    request: HttpRequest,
    form: forms.Form | None,
    *,
    title: str,
    messages: list[str] | None = None,
    nav: str = "",
) -> HttpResponse:
    """400 with every message, the page's title and a link back to the page without filters."""
    lines = messages if messages is not None else form_errors(form) if form is not None else []
    context = {"title": title, "errors": lines, "reset_url": request.path, "nav": nav}
    return render(request, "web/bad_request.html", context, status=400)
