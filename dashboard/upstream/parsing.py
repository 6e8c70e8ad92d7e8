"""Lenient readers for upstream values: numbers sent as strings, booleans as "true", nulls anywhere.

Each reader returns None for a value it cannot read instead of raising, so one odd field never
costs the record; callers decide which fields a record cannot live without.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

_INT = re.compile(r"^\s*[+-]?\d+\s*$")
_HEX = re.compile(r"^\s*0[xX][0-9a-fA-F]+\s*$")
_FRACTION = re.compile(r"(\.\d+)")


def as_int(value: Any) -> int | None:
    """An int from 12, "12", "0x0c", 12.0 or "12.0"; None for null, garbage or a non-integral float."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        if len(value) > 100:
            return None
        if _INT.match(value):
            return int(value)
        if _HEX.match(value):
            return int(value, 16)
        try:
            number = float(value)
        except ValueError:
            return None
        return int(number) if math.isfinite(number) and number.is_integer() else None
    return None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
    return None


def as_str(value: Any) -> str | None:
    """Strings as they are; numbers as their text (ids and amounts sometimes arrive unquoted)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


def as_datetime(value: Any) -> datetime | None:
    """ISO 8601 with Z or an offset, any number of fraction digits; or Unix seconds (number or string)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float) or (isinstance(value, str) and _INT.match(value)):
        seconds = float(value)
        if seconds > 1e11:
            # Milliseconds, as JavaScript clocks give them.
            seconds /= 1000
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # fromisoformat wants 3 or 6 fraction digits before 3.11's relaxations; normalise to 6.
    text = _FRACTION.sub(lambda m: (m.group(1) + "000000")[:7], text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def as_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
