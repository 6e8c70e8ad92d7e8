"""Latency on the stream page (percentiles, p95 over time, the chain's expected finality, the slowest deliveries),
on the Streams page (p95 over 24 h) and the deliveries list's `min_latency` filter."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.sources.models import Source
from dashboard.upstream.chains import find_chain
from tests.web.conftest import STREAM_A, STREAM_B, default_payload, record, store

pytestmark = pytest.mark.django_db


def timed(date: datetime, seconds: float, *, confirmed: bool = False, **fields: Any) -> dict[str, Any]:
    payload = default_payload(100, "0x1")
    payload["block"]["timestamp"] = str(int(date.timestamp() - seconds))
    return record(date=date, confirmed=confirmed, payload=payload, **fields)


@pytest.fixture
def latencies(plain_source: Source) -> datetime:
    now = timezone.now().replace(microsecond=0)
    store(
        plain_source,
        *(timed(now - timedelta(hours=h, minutes=5), s) for h in range(0, 48, 2) for s in (2, 3, 4)),
        timed(now - timedelta(hours=3), 250),  # one slow unconfirmed delivery
        *(timed(now - timedelta(hours=h, minutes=7), 150, confirmed=True) for h in range(0, 48, 4)),
        *(timed(now - timedelta(minutes=9), 40, stream_id=STREAM_B, tag="beta") for _ in range(3)),
    )
    return now


def test_the_stream_page_shows_percentiles_beside_the_expected_finality(
    latencies: datetime, logged_in_client: Client
) -> None:
    response = logged_in_client.get(f"/streams/{STREAM_A}/?range=7d")
    assert response.status_code == 200
    panel = response.context["latency"]
    assert panel.latency.unconfirmed.count == 73 and panel.latency.confirmed.count == 12
    assert 2 <= panel.latency.unconfirmed.p50 <= 5
    assert 120 <= panel.latency.confirmed.p50 <= 300
    finality = find_chain("0x1").finality_seconds  # type: ignore[union-attr]
    assert panel.finality == [("Ethereum", finality)]
    html = response.content.decode()
    assert 'id="stream-latency"' in html and f"Ethereum {finality} s" in html
    assert "min_latency=" in panel.slowest_unconfirmed and "confirmed=false" in panel.slowest_unconfirmed
    # p95 over time: a point per six hours over the week, the slow hour's the highest.
    assert panel.step == timedelta(hours=6) and panel.peaks[0] > 5


def test_a_bad_range_on_the_stream_page_is_a_400(latencies: datetime, logged_in_client: Client) -> None:
    assert logged_in_client.get(f"/streams/{STREAM_A}/?range=5y").status_code == 400


def test_the_streams_page_has_a_latency_column(latencies: datetime, logged_in_client: Client) -> None:
    response = logged_in_client.get("/streams/")
    entries = {e["stats"].key: e for e in response.context["entries"]}
    assert 2 <= entries[STREAM_A]["latency"].unconfirmed.p95 <= 300
    assert 30 <= entries[STREAM_B]["latency"].unconfirmed.p95 <= 60
    assert "Latency p95 24 h" in response.content.decode()


def test_the_slowest_deliveries_link_lists_the_slow_ones(latencies: datetime, logged_in_client: Client) -> None:
    response = logged_in_client.get(f"/deliveries/?stream={STREAM_A}&confirmed=false&min_latency=100&range=7d")
    assert response.status_code == 200
    assert "latency ≥ 100 s" in response.content.decode()
    assert [d.latency_ms // 1000 for d in response.context["deliveries"]] == [250]
    assert logged_in_client.get("/deliveries/?min_latency=-1").status_code == 400


def test_a_delivery_page_says_its_latency_and_when_it_was_delivered(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now().replace(microsecond=0)
    retried = timed(now - timedelta(hours=2), 3)
    retried["tinyPayload"]["retries"] = 2
    (delivery,) = store(plain_source, retried)
    html = logged_in_client.get(f"/deliveries/{delivery.pk}/").content.decode()
    # 3 s, then the second retry 11 min after the first attempt (the published schedule).
    assert "first attempt 3.0 s after its block · delivered about 11 min after it" in html
    (bare,) = store(plain_source, record(date=now, payload={"chainId": "0x1"}))
    assert "unknown (no block timestamp" in logged_in_client.get(f"/deliveries/{bare.pk}/").content.decode()
