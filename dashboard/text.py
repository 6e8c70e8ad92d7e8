"""Making untrusted upstream text safe to look at: HTML escaping is Django's job; this makes invisible and
direction-changing characters visible so a tag or error message cannot disguise itself."""

from __future__ import annotations

import re

from django import template

# Built into every template (TEMPLATES' `builtins`): pages, mails, channel messages and the admin.
register = template.Library()

# C0/C1 controls (but tab and newline), bidi embeddings/overrides/isolates, zero-width characters, BOM.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")


@register.filter
def visible(value: object) -> str:
    """The text with every invisible or reordering character shown as ⟨U+XXXX⟩."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", text)


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters and how many were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit
