"""`visible`: every character that draws nothing or reorders text is shown as ⟨U+XXXX⟩, found by walking the
Unicode database over every code point rather than from a list of known characters."""

from __future__ import annotations

import re
import sys
import unicodedata

from dashboard.text import visible

REORDERING_BIDI_CLASSES = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}
# Characters that draw nothing without being format characters, found by their names.
BLANK_NAME_PATTERN = re.compile(
    r"VARIATION SELECTOR|HANGUL .*FILLER|GRAPHEME JOINER|VOWEL INHERENT|BRAILLE PATTERN BLANK"
)
SHOWN = re.compile(r"⟨U\+([0-9A-F]{4,6})⟩")


def must_be_shown(char: str) -> bool:
    category = unicodedata.category(char)
    if char in "\t\n":
        return False
    return (
        category in {"Cc", "Cf", "Zl", "Zp", "Cs"}
        or unicodedata.bidirectional(char) in REORDERING_BIDI_CLASSES
        or bool(BLANK_NAME_PATTERN.search(unicodedata.name(char, "")))
    )


def shown_points() -> set[int]:
    everything = "".join(chr(point) for point in range(sys.maxunicode + 1))
    out = visible(everything)
    shown = {int(found, 16) for found in SHOWN.findall(out)}
    # Whatever is not shown as a code is kept as it was, in its place.
    assert SHOWN.sub("", out) == "".join(char for char in everything if ord(char) not in shown)
    return shown


def test_it_shows_every_format_control_separator_reordering_and_blank_character() -> None:
    shown = shown_points()
    missing = [f"U+{point:04X}" for point in range(sys.maxunicode + 1)
               if point not in shown and must_be_shown(chr(point))]
    assert missing == []


def test_it_shows_nothing_else_but_unassigned_ignorables() -> None:
    extra = {point for point in shown_points() if not must_be_shown(chr(point))}
    # Unassigned code points Unicode reserves as default-ignorable, as this Python knows them.
    assert all(unicodedata.category(chr(point)) == "Cn" for point in extra)
    assert {0x2065, *range(0xFFF0, 0xFFF9), 0xE0000, 0xE0002, 0xE0FFF} <= extra
    assert extra <= {0x2065, *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)}


def test_it_shows_the_characters_the_issue_names_and_keeps_ordinary_text() -> None:
    for point in (0x061C, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x200B, 0x202E, 0x2066, 0x2069, 0xFE0F,
                  0xE0041, 0xE0100, 0x2028, 0x2029, 0x00AD, 0x180E, 0x034F):
        assert visible(f"a{chr(point)}b") == f"a⟨U+{point:04X}⟩b"
    text = "Failed deliveries\tto https://example.com/hook\n— Ошибка 配信 😀 café\u00a0x"
    assert visible(text) == text
    assert visible("a \x00 \x1b \x7f \x85") == "a ⟨U+0000⟩ ⟨U+001B⟩ ⟨U+007F⟩ ⟨U+0085⟩"
    assert visible(None) == "" and visible(12) == "12"
