from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.sources.models import Source
from tests.web.conftest import STREAM_A, STREAM_B, URL_B, record, store

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("query", "step_minutes", "rollups", "queries"),
    [("range=1h", 1, False, 10), ("range=24h", 60, True, 10), ("range=7d", 180, True, 11), ("range=30d", 360, True, 12)],
)
def test_buckets_adapt_to_the_range(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any,
    query: str, step_minutes: int, rollups: bool, queries: int,
) -> None:
    store(plain_source, record(date=timezone.now() - timedelta(minutes=5)))
    # session, user, the viewer role (user and group permissions), sync banner, the buckets, the filter menus
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the event menu (the decoded event names of the event rollup, one skip scan of its index)
    # (the filter menus come from the stream rows) + the buckets of 30 days read twice, hourly rollups of the
    # edge hours and period rollups of the whole six-hour periods (deliveries.rollup_window); 7 days are
    # bucketed by 3 hours, which the period rollups cannot give
    # + the latency panel's one grouped read of the rollups' histograms per time bucket and chain
    # (web.latency_panel, deliveries.rollup_window.latency_bucketed): the hourly rollups up to two days, the edge
    # hours and the stream period rollups' whole six-hour periods beyond (7 d and 30 d: two queries)
    with django_assert_num_queries(queries):
        response = logged_in_client.get(f"/timeline/?{query}")
    timeline = response.context["timeline"]
    assert timeline.step == timedelta(minutes=step_minutes)
    assert timeline.from_rollups is rollups
    # Buckets align to fixed boundaries, so the range can touch one more than it spans.
    assert 1 <= len(timeline.buckets) <= 121
    assert timeline.chart.delivered == 1


def test_a_slice_counts_only_its_deliveries_and_bars_link_to_the_list(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(minutes=10), stream_id=STREAM_A),
        record(date=now - timedelta(minutes=10), stream_id=STREAM_B, url=URL_B, error="socket hang up", retries=1),
        record(date=now - timedelta(minutes=12), stream_id=STREAM_B, url=URL_B),
    )
    response = logged_in_client.get(f"/timeline/?stream={STREAM_B}&range=1h")
    chart = response.context["timeline"].chart
    assert (chart.delivered, chart.failed) == (1, 1)
    bar = next(b for b in chart.bars if b.fail_h)
    params = parse_qs(urlsplit(bar.fail_href).query)
    assert params["stream"] == [STREAM_B] and params["status"] == ["failing"] and params["range"] == ["custom"]

    # The bar's link opens exactly that slice of the list.
    listed = logged_in_client.get(bar.fail_href)
    assert listed.status_code == 200
    assert len(listed.context["deliveries"]) == 1
    assert listed.context["deliveries"][0].error_message == "socket hang up"
    assert bar.fail_href.replace("&", "&amp;") in response.content.decode()


def test_a_custom_range_and_a_tag_or_url(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    store(plain_source, record(date=now - timedelta(days=2), tag="beta", url=URL_B))
    start = (now - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    end = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    for query in (f"tag=beta&range=custom&start={start}&end={end}", f"url={URL_B}&start={start}&end={end}"):
        timeline = logged_in_client.get(f"/timeline/?{query}").context["timeline"]
        assert timeline.chart.delivered == 1, query
    assert logged_in_client.get(f"/timeline/?tag=alpha&start={start}&end={end}").context["timeline"].chart.empty
