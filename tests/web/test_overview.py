from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.sources.models import Source
from tests.web.conftest import STREAM_B, URL_B, record, store

pytestmark = pytest.mark.django_db


def test_it_shows_counts_worst_streams_errors_and_sources(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(minutes=10)),
        record(date=now - timedelta(minutes=20), stream_id=STREAM_B, tag="beta", url=URL_B,
               error="connect ECONNREFUSED 10.0.0.1:443", retries=2),
        record(date=now - timedelta(hours=5)),
        record(date=now - timedelta(days=3), error="socket hang up", retries=7),
    )
    # session, user, the viewer role (user and group permissions), sync banner, 1 h/24 h counts (raw edge hours,
    # whole-hour rollups), 7-day rollups, error templates, sources, chart
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the 7-day rollups read twice: period rollups of the whole periods before the last 24 hours, hourly
    # rollups of the rest (deliveries.rollup_window)
    with django_assert_num_queries(13):
        response = logged_in_client.get("/")
    assert response.status_code == 200
    cards = {c["label"]: (c["total"], c["failed"]) for c in response.context["cards"]}
    assert cards == {"Last hour": (2, 1), "Last 24 hours": (3, 1), "Last 7 days": (4, 2)}
    assert response.context["open_group_count"] == 1
    assert [s.key for s in response.context["worst_streams"]] == [STREAM_B]
    assert [u.key for u in response.context["worst_urls"]] == [URL_B]
    assert response.context["top_groups"][0].label == "connect ECONNREFUSED <ip>"
    body = response.content.decode()
    assert "Catching up" in body and "Up to date" not in body
    assert '<svg class="chart js-zoom"' in body
    # Each card's failing figure says what it counts.
    assert "1 retrying or failed now</a>" in body
    assert "of the deliveries first sent in this window, those retrying or failed now" in body

    # Once a walk of the whole history has completed, the source reads as up to date.
    Source.objects.filter(pk=plain_source.pk).update(synced_through=now)
    body = logged_in_client.get("/").content.decode()
    assert "Up to date" in body and "Catching up" not in body


def test_an_empty_database_renders(plain_source: Source, logged_in_client: Client) -> None:
    response = logged_in_client.get("/")
    assert response.status_code == 200
    assert "No failures in the last 24 hours." in response.content.decode()


def test_the_chart_range_is_in_the_url(plain_source: Source, logged_in_client: Client) -> None:
    store(plain_source, record(date=timezone.now() - timedelta(days=20)))
    week = logged_in_client.get("/?range=7d").context["timeline"]
    month = logged_in_client.get("/?range=30d").context["timeline"]
    assert week.chart.delivered == 0
    assert month.chart.delivered == 1
    assert month.from_rollups


def test_the_live_partial_has_no_page_around_it(plain_source: Source, logged_in_client: Client) -> None:
    response = logged_in_client.get("/", headers={"X-Live-Refresh": "1"})
    body = response.content.decode()
    assert "Open error groups" in body
    assert "<html" not in body
    full = logged_in_client.get("/").content.decode()
    assert "data-live" in full and "js-live-toggle" in full


def test_a_failing_source_is_shown(plain_source: Source, logged_in_client: Client) -> None:
    Source.objects.filter(pk=plain_source.pk).update(
        last_error_at=timezone.now(), last_error_kind="unreachable",
        last_error_message="<b>connection refused</b>", consecutive_failures=3,
    )
    body = logged_in_client.get("/").content.decode()
    assert "Needs attention" in body
    assert "&lt;b&gt;connection refused&lt;/b&gt;" in body


def test_the_24_hour_card_and_the_chart_agree_or_say_why(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    store(plain_source, record(date=now - timedelta(hours=2)), record(date=now - timedelta(hours=3), error="x", retries=1))
    response = logged_in_client.get("/", {"range": "24h"})
    chart = response.context["timeline"].chart
    card = next(c for c in response.context["cards"] if c["range"] == "24h")
    assert (chart.delivered + chart.failed, chart.failed) == (card["total"], card["failed"]) == (2, 1)
    assert response.context["chart_note"] == ""
    assert "1 delivered · 1 failing" in response.content.decode()

    # A delivery in the chart's first whole-hour bar, just before the card's exact 24 hours.
    first_bar = response.context["timeline"].buckets[0].start
    if first_bar == now - timedelta(hours=24):
        pytest.skip("the window starts on the hour: the first bar and the card start together")
    store(plain_source, record(date=first_bar, error="y", retries=1))
    response = logged_in_client.get("/", {"range": "24h"})
    card = next(c for c in response.context["cards"] if c["range"] == "24h")
    assert (card["total"], card["failed"]) == (2, 1)
    note = response.context["chart_note"]
    assert note.startswith("The chart counts +1 deliveries (+1 failing) against the \u201cLast 24 hours\u201d card")
    assert f"starts at {first_bar:%H:%M} UTC" in note
    assert note in response.content.decode().replace("&#x27;", "'")


def test_the_chart_note_says_seconds_under_a_minute() -> None:
    from dashboard.web.views.overview import _minutes

    assert [_minutes(timedelta(seconds=s)) for s in (0, 42, 60, 150, 7200)] == ["0 s", "42 s", "1 min", "2 min", "2.0 h"]
