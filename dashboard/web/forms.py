"""Every query-string filter of every page, validated by a form: bad input is a 400 with a message."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.utils import timezone

from dashboard import times
from dashboard.deliveries.schedule import MAX_RETRIES
from dashboard.deliveries.search import (
    SearchError,
    SearchTerm,
    event_name,
    parse_search,
    search_deliveries,
    search_error_text,
)
from dashboard.text import visible
from dashboard.upstream.chains import CHAINS, find_chain

RANGES: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
RANGE_CHOICES = [(key, key) for key in RANGES] + [("custom", "Custom")]
MAX_SPAN = timedelta(days=400)
# Charts step through a window bucket by bucket; dates near datetime's limits (year 1 or 9999) would overflow.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2999, 12, 31, 23, 59, 59, tzinfo=UTC)
# Filter menus offer the streams with a delivery this recent, their tags and URLs (a value in the URL is kept
# regardless).
MENU_WINDOW = timedelta(days=30)
DATETIME_FORMATS = [
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
]
_CURSOR = re.compile(r"^(\d{1,19})_([0-9a-f]{32})$")


def search_term(text: str) -> SearchTerm | None:
    """The search box's text as a term of indexed keys; None when blank, a form error when unreadable."""
    if not text.strip():
        return None
    try:
        return parse_search(text)
    except SearchError as exc:
        raise forms.ValidationError(str(exc)) from exc


def event_filter(text: str) -> str:
    """The `event` filter of the timeline and error-group pages: a decoded event's name as the event rollup
    spells it ("" for every delivery)."""
    if not text.strip():
        return ""
    try:
        return event_name(text)
    except SearchError as exc:
        raise forms.ValidationError(str(exc)) from exc


@dataclass(frozen=True)
class Window:
    start: datetime | None
    end: datetime | None
    preset: str  # a RANGES key, "custom" or "" (all time)

    @property
    def span(self) -> timedelta | None:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start


def encode_cursor(date: datetime, pk: uuid.UUID) -> str:
    micros = int(date.timestamp()) * 1_000_000 + date.microsecond
    return f"{micros}_{pk.hex}"


def decode_cursor(text: str) -> tuple[datetime, uuid.UUID]:
    match = _CURSOR.match(text)
    if not match:
        raise forms.ValidationError("This page link is not valid; go back to the first page.")
    micros = int(match.group(1))
    try:
        date = datetime.fromtimestamp(micros // 1_000_000, tz=UTC).replace(microsecond=micros % 1_000_000)
    except (OverflowError, ValueError, OSError) as exc:
        raise forms.ValidationError("This page link is not valid; go back to the first page.") from exc
    return date, uuid.UUID(match.group(2))


class RangeForm(forms.Form):
    """A time window: a preset (1h, 24h, 7d, 30d) or a custom start and end, in UTC."""

    range = forms.ChoiceField(choices=RANGE_CHOICES, required=False, label="Range")
    start = forms.DateTimeField(required=False, input_formats=DATETIME_FORMATS)
    end = forms.DateTimeField(required=False, input_formats=DATETIME_FORMATS)

    # The preset used when the URL names none; "" means all time.
    default_range = "24h"

    def __init__(self, *args: Any, now: datetime | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        start, end = cleaned.get("start"), cleaned.get("end")
        preset = cleaned.get("range") or ("custom" if start or end else self.default_range)
        if self.errors:
            return cleaned
        if any(d is not None and not EARLIEST <= d <= LATEST for d in (start, end)):
            raise forms.ValidationError(
                f"Dates must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)."
            )
        if preset == "custom":
            if start is None and end is None:
                # Not all time: a custom range chosen without its dates is a mistake to point out, not a filter.
                raise forms.ValidationError("A custom range needs its dates: a start, an end, or both (UTC).")
            if start is None and self.default_range:
                raise forms.ValidationError("A custom range needs a start date.")
            end = end or self.now
            if start is not None and start >= end:
                raise forms.ValidationError("The start of the range must be before its end.")
            if start is not None and end - start > MAX_SPAN:
                raise forms.ValidationError(f"A range can span at most {MAX_SPAN.days} days.")
            cleaned["window"] = Window(start, end, "custom")
        elif preset:
            cleaned["window"] = Window(self.now - RANGES[preset], self.now, preset)
        else:
            cleaned["window"] = Window(None, None, "")
        return cleaned


class ZoneField(forms.CharField):
    """The time zone a chart's times are shown in, by its tz database name; blank is UTC."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, max_length=times.ZONE_NAME_LIMIT, label="Time zone", **kwargs)

    def clean(self, value: Any) -> ZoneInfo:  # type: ignore[override]
        text = super().clean(value)
        try:
            return times.zone(text or "UTC")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


class ChartRangeForm(RangeForm):
    """A chart's window (a preset, or a custom range as dragging across a chart picks it) and the zone its
    times are shown in. A custom range is clamped to what is kept: the hourly rollups reach back
    ROLLUP_RETENTION_DAYS, and nothing lies after now; `clamped` says what was cut."""

    tz = ZoneField()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        window: Window | None = cleaned.get("window")
        cleaned["clamped"] = ""
        if window is None or window.start is None or window.end is None:
            return cleaned
        days = settings.ROLLUP_RETENTION_DAYS
        oldest = self.now - timedelta(days=days)
        if window.start >= self.now:
            raise forms.ValidationError(
                f"The range starts after now ({times.iso(self.now)}): there is nothing to show yet."
            )
        if window.end <= oldest:
            raise forms.ValidationError(
                f"The range ends before {times.iso(oldest)}: counts are kept for {days} days "
                "(ROLLUP_RETENTION_DAYS)."
            )
        start, end = max(window.start, oldest), min(window.end, self.now)
        cut = []
        if start != window.start:
            cut.append(f"starts at {times.iso(start)}, as counts are kept for {days} days")
        if end != window.end:
            cut.append("ends now")
        if cut:
            cleaned["clamped"] = f"The range was cut to what is kept: it {' and '.join(cut)}."
            cleaned["window"] = Window(start, end, window.preset)
        return cleaned


class SliceForm(RangeForm):
    """A range plus the dimensions of a timeline: one stream, tag or webhook URL (or all deliveries)."""

    stream = forms.CharField(required=False, max_length=64)
    tag = forms.CharField(required=False, max_length=255)
    url = forms.CharField(required=False, max_length=2048, label="URL")

    def slice_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "stream_id": data.get("stream") or None,
            "tag": data.get("tag") or None,
            "webhook_url": data.get("url") or None,
        }


class ChainFilterForm(forms.Form):
    """The `chain` filter of the deliveries list and the timeline: a chain by its hex id or name."""

    chain = forms.CharField(required=False, max_length=20)

    def clean_chain(self) -> str:
        text = (self.cleaned_data.get("chain") or "").strip().lower()
        if not text:
            return ""
        chain = find_chain(text)
        if chain is not None:
            return chain.hex_id
        # Deliveries may come from any chain, so any hex id goes, spelled as ingest stores it ("0x89").
        if re.fullmatch(r"0x[0-9a-f]{1,16}", text):
            return hex(int(text, 16))
        raise forms.ValidationError(
            "A chain is a hex chain id such as 0x89 or a name such as eth, polygon or bsc."
        )

    @property
    def chain_choices(self) -> list[tuple[str, str]]:
        """The chain menu: every chain of the one chain table, plus a hex id from a link that is not in it."""
        choices = [("", "All chains")] + [(c.hex_id, f"{c.display_name} · {c.hex_id}") for c in CHAINS]
        current = self.cleaned_data.get("chain") if hasattr(self, "cleaned_data") else None
        if current and find_chain(current) is None:
            choices.append((current, current))
        return choices


class TimelineForm(ChartRangeForm, ChainFilterForm, SliceForm):
    """The Timeline page: a slice, a chart window, a time zone, and optionally only the deliveries holding
    one decoded event."""

    event = forms.CharField(required=False, max_length=80)

    def clean_event(self) -> str:
        return event_filter(self.cleaned_data.get("event") or "")

    def slice_kwargs(self) -> dict[str, Any]:
        return {**super().slice_kwargs(), "chain_id": self.cleaned_data.get("chain") or None}


STATUS_CHOICES = [
    ("", "Any status"),
    ("delivered", "Delivered"),
    ("failing", "Failing (retrying or failed)"),
    ("retrying", "Retrying"),
    ("failed", "Failed (retries used up)"),
]
CONFIRMED_CHOICES = [("", "Any"), ("true", "Confirmed"), ("false", "Unconfirmed")]
ORDER_CHOICES = [("newest", "Newest first"), ("oldest", "Oldest first")]


class DeliveryFilterForm(ChainFilterForm, SliceForm):
    """Filters of the deliveries list and its CSV export."""

    default_range = ""

    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    group = forms.IntegerField(required=False, min_value=1, max_value=2**62, label="Error group")
    error = forms.CharField(required=False, max_length=200, label="Error text")
    confirmed = forms.ChoiceField(choices=CONFIRMED_CHOICES, required=False)
    retries = forms.IntegerField(
        required=False, min_value=0, max_value=MAX_RETRIES, label="Retries ≥",
        error_messages={"max_value": f"The provider retries at most {MAX_RETRIES} times."},
    )
    # Seconds from the block to the first attempt (processing latency): the slowest deliveries of a stream.
    # To the millisecond, so a link at a p95 selects exactly the deliveries at or above it.
    min_latency = forms.DecimalField(
        required=False, min_value=0, max_value=30 * 86400, decimal_places=3, label="Latency ≥ (s)"
    )
    q = forms.CharField(required=False, max_length=200, label="Search")
    order = forms.ChoiceField(choices=ORDER_CHOICES, required=False)
    after = forms.CharField(required=False, max_length=60, label="Page position")
    before = forms.CharField(required=False, max_length=60, label="Page position")

    def clean_q(self) -> SearchTerm | None:
        return search_term(self.cleaned_data.get("q") or "")

    def clean_after(self) -> tuple[datetime, uuid.UUID] | None:
        text = self.cleaned_data.get("after") or ""
        return decode_cursor(text) if text else None

    def clean_before(self) -> tuple[datetime, uuid.UUID] | None:
        text = self.cleaned_data.get("before") or ""
        return decode_cursor(text) if text else None

    @property
    def newest_first(self) -> bool:
        return self.cleaned_data.get("order") != "oldest"

    def filtered(self, qs: Any) -> Any:
        """The deliveries this form selects, whatever the page: the list and the export share it."""
        data = self.cleaned_data
        qs = qs.slice(
            **self.slice_kwargs(),
            chain_id=data.get("chain") or None,
            status=data.get("status") or None,
            error_group_id=data.get("group"),
            with_error_text=bool(data.get("error")),
        )
        window: Window = data["window"]
        qs = qs.between(window.start, window.end)
        if data.get("error"):
            # The same error-text query as the search box and the admin: through the error groups' index.
            qs = search_error_text(qs, data["error"]).deliveries
        if data.get("confirmed"):
            qs = qs.filter(confirmed=data["confirmed"] == "true")
        if data.get("retries") is not None and data["retries"] > 0:
            qs = qs.filter(retries__gte=data["retries"])
        if data.get("min_latency") is not None:
            qs = qs.filter(latency_ms__gte=int(data["min_latency"] * 1000))
        if data.get("q") is not None:
            # The same query as the search box and the admin: see search.key_matches.
            qs = search_deliveries(qs, data["q"]).deliveries
        return qs


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")

    def clean_q(self) -> SearchTerm | None:
        return search_term(self.cleaned_data.get("q") or "")


DIMENSION_CHOICES = [("stream", "Stream"), ("tag", "Tag")]


class RetryStatsForm(RangeForm):
    default_range = "7d"
    by = forms.ChoiceField(choices=DIMENSION_CHOICES, required=False, label="Group by")
    stream = forms.CharField(required=False, max_length=64)
    tag = forms.CharField(required=False, max_length=255)


class PairGapsForm(RangeForm):
    default_range = "24h"


class ErrorGroupsForm(RangeForm):
    default_range = "7d"
    stream = forms.CharField(required=False, max_length=64)
    tag = forms.CharField(required=False, max_length=255)
    url = forms.CharField(required=False, max_length=2048, label="URL")
    event = forms.CharField(required=False, max_length=80)

    def clean_event(self) -> str:
        return event_filter(self.cleaned_data.get("event") or "")


ERROR_LINE_LIMIT = 300


def form_errors(form: forms.Form) -> list[str]:
    """Every error of a bound form as "Field: message" lines for the 400 page."""
    lines: list[str] = []
    for name, errors in form.errors.items():
        label = "" if name == "__all__" else f"{form.fields[name].label or name.capitalize()}: "
        # Errors may quote the typed value: an invisible or direction-changing character is shown, not obeyed.
        lines.extend(_clip(visible(f"{label}{error}")) for error in errors)
    return lines


def _clip(line: str) -> str:
    # Choice errors echo the value from the URL, which can be kilobytes long.
    return line if len(line) <= ERROR_LINE_LIMIT else line[: ERROR_LINE_LIMIT - 1] + "…"
