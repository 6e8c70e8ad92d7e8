"""A timeline chart's window from the URL (as dragging across a chart sets it) and the zone its times are shown
in: validated (a 400 with a message, never a 500), clamped to what is kept, named on the page."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from dashboard.sources.models import Source
from dashboard.web.timeline import LINK_FORMAT
from tests.web.conftest import STREAM_B, URL_B, record, store

pytestmark = pytest.mark.django_db


def _iso(moment: datetime) -> str:
    return moment.strftime(LINK_FORMAT)


@pytest.mark.parametrize("page", ["/timeline/", "/"])
def test_a_dragged_window_opens_that_window_with_a_way_back(
    plain_source: Source, logged_in_client: Client, page: str
) -> None:
    now = timezone.now().replace(microsecond=0)
    store(plain_source, record(date=now - timedelta(minutes=50)), record(date=now - timedelta(minutes=20)))
    start, end = now - timedelta(minutes=30), now - timedelta(minutes=10)
    response = logged_in_client.get(f"{page}?range=custom&start={_iso(start)}&end={_iso(end)}&tz=UTC")
    assert response.status_code == 200
    window = response.context["window"]
    assert (window.start, window.end, window.preset) == (start, end, "custom")
    chart = response.context["timeline"].chart
    assert (chart.delivered, chart.failed) == (1, 0)  # the delivery 50 min ago is outside the zoom
    body = response.content.decode()
    # The SVG carries its first bucket's start and last bucket's end, so a drag maps x to time.
    assert f'data-start="{chart.start.isoformat()}"' in body and f'data-end="{chart.end.isoformat()}"' in body
    assert 'class="js-reset-zoom"' in body
    # Reset drops the window but keeps the rest of the URL.
    assert 'href="?tz=UTC" class="js-reset-zoom"' in body
    assert "Reset zoom" not in logged_in_client.get(page).content.decode()


def test_the_zoom_keeps_the_slice(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now().replace(microsecond=0)
    store(plain_source, record(date=now - timedelta(minutes=20)),
          record(date=now - timedelta(minutes=20), stream_id=STREAM_B, url=URL_B))
    start, end = now - timedelta(minutes=30), now - timedelta(minutes=10)
    response = logged_in_client.get(f"/timeline/?stream={STREAM_B}&range=custom&start={_iso(start)}&end={_iso(end)}")
    assert response.context["timeline"].chart.delivered == 1


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("range=custom&start=yesterday&end=2026-11-25T04:00:00", "Start: Enter a valid date/time."),
        ("range=custom&start=2026-11-25T05:00:00&end=2026-11-25T04:00:00",
         "The start of the range must be before its end."),
        ("range=custom&start=0001-01-01T00:00:00", "Dates must lie between 1970-01-01 and 2999-12-31 (UTC)."),
        ("range=custom&start=2999-01-01T00:00:00&end=2999-01-02T00:00:00", "The range starts after now ("),
        ("range=custom&start=1990-01-01T00:00:00&end=1990-01-02T00:00:00",
         f"counts are kept for {settings.ROLLUP_RETENTION_DAYS} days (ROLLUP_RETENTION_DAYS)."),
        ("tz=Mars/Olympus", "Time zone: No time zone is called “Mars/Olympus”: use a name of the tz database"),
        ("tz=../../../etc/passwd", "No time zone is called “../../../etc/passwd”"),
        ("tz=%E2%80%AEnilreB/eporuE", "No time zone is called “⟨U+202E⟩nilreB/eporuE”"),
        ("tz=" + "x" * 500, "Time zone: Ensure this value has at most 64 characters"),
        # An offset is read: 06:00 at UTC-5 is 11:00 UTC, after the end.
        ("range=custom&start=2026-11-25T06:00:00-05:00&end=2026-11-25T10:00:00",
         "The start of the range must be before its end."),
    ],
)
@pytest.mark.parametrize("page", ["/timeline/", "/"])
def test_bad_input_is_a_400_with_a_message(logged_in_client: Client, page: str, query: str, message: str) -> None:
    response = logged_in_client.get(f"{page}?{query}")
    assert response.status_code == 400
    assert message in response.content.decode()


def test_a_window_reaching_past_retention_is_clamped_and_says_so(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    days = settings.ROLLUP_RETENTION_DAYS
    start, end = now - timedelta(days=days + 30), now - timedelta(days=days - 10)
    response = logged_in_client.get(f"/timeline/?range=custom&start={_iso(start)}&end={_iso(end)}")
    assert response.status_code == 200
    window = response.context["window"]
    assert timedelta(0) <= window.start - (now - timedelta(days=days)) < timedelta(minutes=1)
    assert window.end.replace(microsecond=0) == end.replace(microsecond=0)
    assert response.context["timeline"].from_rollups
    body = response.content.decode()
    assert f"The range was cut to what is kept: it starts at {window.start:%Y-%m-%d %H:%M:%S} UTC, as counts are " \
        f"kept for {days} days." in body

    # A window reaching into the future ends now.
    later = logged_in_client.get(
        f"/?range=custom&start={_iso(now - timedelta(hours=1))}&end={_iso(now + timedelta(days=2))}"
    )
    assert later.status_code == 200
    assert timedelta(0) <= later.context["window"].end - now < timedelta(minutes=1)
    assert "The range was cut to what is kept: it ends now." in later.content.decode()


def test_a_short_window_older_than_the_deliveries_reads_the_rollups(
    plain_source: Source, logged_in_client: Client
) -> None:
    # Deliveries go after HISTORY_RETENTION_DAYS, rollups stay: an hour zoomed into then reads the rollups.
    then = (timezone.now() - timedelta(days=settings.HISTORY_RETENTION_DAYS + 5)).replace(minute=30, second=0,
                                                                                          microsecond=0)
    store(plain_source, record(date=then))
    response = logged_in_client.get(
        f"/timeline/?range=custom&start={_iso(then - timedelta(minutes=30))}&end={_iso(then + timedelta(minutes=30))}"
    )
    timeline = response.context["timeline"]
    assert timeline.from_rollups and timeline.step == timedelta(hours=1)
    assert timeline.chart.delivered == 1


def test_times_are_shown_in_the_zone_asked_for_and_named(plain_source: Source, logged_in_client: Client) -> None:
    day = (timezone.now() - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = day + timedelta(hours=10), day + timedelta(hours=16)
    store(plain_source, record(date=day + timedelta(hours=12, minutes=30)))
    query = f"range=custom&start={_iso(start)}&end={_iso(end)}"
    utc = logged_in_client.get(f"/timeline/?{query}").content.decode()
    assert f"{day:%Y-%m-%d} 10:00 UTC → {day:%Y-%m-%d} 16:00 UTC" in utc
    assert 'Times in <strong class="js-zone-name">UTC</strong>' in utc
    assert ">10:00</text>" in utc

    response = logged_in_client.get(f"/timeline/?{query}&tz=Asia/Tokyo")
    assert response.status_code == 200
    body = response.content.decode()
    # Tokyo is UTC+9 all year: the window, the caption, the axis and the bars' titles say so.
    next_day = day + timedelta(days=1)
    assert f"{day:%Y-%m-%d} 19:00 JST → {next_day:%Y-%m-%d} 01:00 JST (Asia/Tokyo)" in body
    assert 'Times in <strong class="js-zone-name">Asia/Tokyo</strong>' in body
    assert ">19:00</text>" in body and ">10:00</text>" not in body
    assert f"<title>{day:%Y-%m-%d} 21:30–21:35 JST · 1 delivered" in body
    # The way back to UTC, and the range fields still take UTC, as the URL does.
    encoded = f"start={day:%Y-%m-%d}T10%3A00%3A00&amp;end={day:%Y-%m-%d}T16%3A00%3A00"
    assert f'href="?range=custom&amp;{encoded}">show in UTC' in body
    assert f'name="start" value="{day:%Y-%m-%d}T10:00:00"' in body
    # Bars still link to the list in UTC.
    assert f"start={day:%Y-%m-%d}T12%3A00%3A00" in body


def test_the_overview_chart_follows_the_zone(plain_source: Source, logged_in_client: Client) -> None:
    store(plain_source, record(date=timezone.now() - timedelta(minutes=20)))
    body = logged_in_client.get("/?range=24h&tz=America/New_York").content.decode()
    assert 'Times in <strong class="js-zone-name">America/New_York</strong>' in body
    assert " EST ·" in body or " EDT ·" in body
    # The presets keep the zone.
    assert 'href="?range=1h&amp;tz=America%2FNew_York"' in body
