"""Service level objectives on the pages: the Streams page's error budget column (`expectations.objectives`)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from dashboard.expectations.objectives import Budget, budgets

register = template.Library()


@register.simple_tag
def stream_budgets(entries: Any) -> dict[str, Budget]:
    """Of the Streams page's entries, each stream's budget over the objectives' window."""
    return budgets(timezone.now(), [entry["stats"].key for entry in entries])


@register.filter
def budget_class(left: object) -> str:
    """How a budget left reads: spent (bad), under a quarter (warn), else ok."""
    if not isinstance(left, int | float):
        return "faint"
    return "bad" if left <= 0 else "warn" if left < 0.25 else "ok"


@register.filter
def budget_left(left: object) -> str:
    """A budget left as a person reads it: "72 % left", "3.1× spent" (overspent: spent 3.1 times over)."""
    if not isinstance(left, int | float):
        return "—"
    if left < 0:
        return f"{1 - left:.1f}× spent"
    return f"{100 * left:.0f} % left"
