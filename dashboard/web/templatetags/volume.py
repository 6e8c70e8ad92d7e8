"""The Streams page's expected volume: per stream, what its own history expected in the least probable window
ending now and what arrived (`expectations.volume`, the quiet-stream condition's reading)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from dashboard.expectations.volume import Verdict, verdicts

register = template.Library()


@register.simple_tag
def stream_volumes(entries: Any) -> dict[str, Verdict]:
    return verdicts(timezone.now(), [entry["stats"].key for entry in entries])
