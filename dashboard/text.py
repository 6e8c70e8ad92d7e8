"""Making untrusted upstream text safe to look at: HTML escaping is Django's job; this makes invisible and
direction-changing characters visible so a tag or error message cannot disguise itself."""

from __future__ import annotations

import array
import re
import sys
import unicodedata

from django import template

# Built into every template (TEMPLATES' `builtins`): pages, mails, channel messages and the admin.
register = template.Library()

# Control characters (but tab and newline), format characters (zero-width spaces and joiners, the bidi marks,
# embeddings, overrides and isolates, U+061C, BOM, tag characters, the soft hyphen...), line and paragraph
# separators, and lone surrogates (which would fail the page's encoding). Every character of a reordering
# bidi class (LRE...PDI) is a format character; the test walks the bidi classes to keep it so.
_HIDDEN_CATEGORIES = re.compile("C[cfs]|Z[lp]")
# Letters and marks that draw nothing, so they disguise text as well as format characters do (Unicode's
# Default_Ignorable_Code_Point, which unicodedata does not expose, outside the categories above), and the
# blank Braille cell, popular for names that look empty. The test finds them again by name.
_BLANK_NAMES = (
    "COMBINING GRAPHEME JOINER", "HANGUL CHOSEONG FILLER", "HANGUL JUNGSEONG FILLER", "HANGUL FILLER",
    "HALFWIDTH HANGUL FILLER", "KHMER VOWEL INHERENT AQ", "KHMER VOWEL INHERENT AA", "BRAILLE PATTERN BLANK",
    *(f"MONGOLIAN FREE VARIATION SELECTOR {n}" for n in ("ONE", "TWO", "THREE", "FOUR")),
    *(f"VARIATION SELECTOR-{n}" for n in range(1, 257)),
)
# Unassigned code points Unicode reserves as default-ignorable: whatever they become, they will draw nothing.
_RESERVED_IGNORABLE = (range(0x2065, 0x2066), range(0xFFF0, 0xFFF9), range(0xE0000, 0xE1000))
_SHOWN_AS_THEMSELVES = frozenset("\t\n")


def _hidden_points() -> set[int]:
    # Every code point as one string, built by a codec rather than a million chr() calls; the categories
    # joined into one string of two letters each, so a regex finds the hidden ones without a Python loop.
    # The whole walk costs ~0.2 s, once per process.
    everything = array.array("I", range(sys.maxunicode + 1)).tobytes().decode("utf-32-le", "surrogatepass")
    categories = "".join(map(unicodedata.category, everything))
    points = {match.start() // 2 for match in _HIDDEN_CATEGORIES.finditer(categories)}
    points.update(ord(unicodedata.lookup(name)) for name in _BLANK_NAMES)
    points.update(point for reserved in _RESERVED_IGNORABLE for point in reserved
                  if unicodedata.category(chr(point)) == "Cn")
    return points - {ord(char) for char in _SHOWN_AS_THEMSELVES}


def _character_class(points: frozenset[int], *, tail: str = "") -> re.Pattern[str]:
    """One regex character class of the points, as ranges, and `tail` (more ranges, as written)."""
    ranges: list[list[int]] = []
    for point in sorted(points):
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1][1] = point
        else:
            ranges.append([point, point])
    parts = (
        f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}" for first, last in ranges
    )
    return re.compile(f"[{''.join(parts)}{tail}]")


_HIDDEN = frozenset(_hidden_points())
# Most text is ASCII (CPython knows without a scan): only the control characters can hide in it.
_HIDDEN_IN_ASCII = _character_class(frozenset(point for point in _HIDDEN if point < 0x80))
# Python's regex engine tests a character of the Basic Multilingual Plane against a class by one bitmap
# lookup, but against each of a class's ranges above it one by one, for every character scanned: listing the
# few hidden ranges up there made ordinary text ~2x slower to scan. The class takes every character above the
# BMP instead, and `_show` keeps those that are not hidden (emoji, mostly) as they are.
_HIDDEN_OR_ASTRAL = _character_class(
    frozenset(point for point in _HIDDEN if point <= 0xFFFF), tail=f"\\U00010000-\\U{sys.maxunicode:08x}"
)


def _show(match: re.Match[str]) -> str:
    char = match.group()
    return f"⟨U+{ord(char):04X}⟩" if ord(char) in _HIDDEN else char


@register.filter
def visible(value: object) -> str:
    """The text with every invisible or reordering character shown as ⟨U+XXXX⟩."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return (_HIDDEN_IN_ASCII if text.isascii() else _HIDDEN_OR_ASTRAL).sub(_show, text)


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters and how many were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit
