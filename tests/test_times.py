"""dashboard/times.py: the one way a moment is written, and time zones by name."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from django.template import Context, Template
from django.utils import dateformat

from dashboard import times

MOMENT = datetime(2026, 11, 25, 4, 41, 34, 250_000, tzinfo=UTC)


def test_a_moment_is_iso_with_its_zone_named() -> None:
    assert times.iso(MOMENT) == "2026-11-25 04:41:34 UTC"
    assert times.iso(MOMENT, seconds=False) == "2026-11-25 04:41 UTC"
    assert times.iso(MOMENT, ZoneInfo("Europe/Berlin")) == "2026-11-25 05:41:34 CET"
    assert times.iso(datetime(2026, 11, 25, 4, 41, 34)) == "2026-11-25 04:41:34 UTC"  # naive is UTC
    assert times.iso(None) == "" and times.iso("2026-11-25") == "" and times.iso(date(2026, 11, 25)) == ""


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/Sao_Paulo", "Asia/Kolkata", "Australia/Lord_Howe"])
def test_the_fast_format_writes_what_djangos_date_format_writes(name: str) -> None:
    # iso() formats with strftime for speed; the admin formats through Django with the same DATETIME_FORMAT.
    zone = ZoneInfo(name)
    for moment in (MOMENT, datetime(2026, 3, 29, 1, 30, tzinfo=UTC), datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)):
        local = moment.astimezone(zone)
        assert times.iso(moment, zone) == dateformat.format(local, times.DATETIME_FORMAT)
        assert times.iso(moment, zone, seconds=False) == dateformat.format(local, "Y-m-d H:i T")


def test_every_template_has_the_filters_without_a_load() -> None:
    template = Template("{{ m|iso }} · {{ m|iso_minutes:zone }}")
    rendered = template.render(Context({"m": MOMENT, "zone": ZoneInfo("Asia/Kolkata")}))
    assert rendered == "2026-11-25 04:41:34 UTC · 2026-11-25 10:11 IST"


def test_zones_are_names_of_the_tz_database() -> None:
    assert times.zone("Europe/Berlin") == ZoneInfo("Europe/Berlin")
    assert times.zone(" utc ") == ZoneInfo("UTC")
    assert times.zone_names()[0] == "UTC" and "America/New_York" in times.zone_names()


@pytest.mark.parametrize(
    "text", ["Mars/Olympus", "../../etc/passwd", "/usr/share/zoneinfo/UTC", "Europe/Berlin\x00", "x" * 100, ""]
)
def test_anything_else_is_refused_with_a_message(text: str) -> None:
    with pytest.raises(ValueError, match="No time zone is called"):
        times.zone(text)
