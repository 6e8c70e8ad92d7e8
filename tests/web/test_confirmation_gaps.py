"""Confirmation gaps: blocks whose confirmed delivery never came after the chain's finality, or is failing
while the unconfirmed one was delivered; and a delivery's pair."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.deliveries import partitions
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.pairs import confirmation_gaps
from dashboard.sources.models import Source
from tests.checks import readable_plan
from tests.web.conftest import STREAM_A, STREAM_B, record, store

pytestmark = pytest.mark.django_db

FAILED = {"error": "Request failed with status code 502", "retries": 7}


def blocks(source: Source) -> dict[tuple[str, int, bool], Delivery]:
    now = timezone.now()
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    store(
        source,
        record(block=1, confirmed=False, date=ago(40)), record(block=1, confirmed=True, date=ago(35)),  # whole
        record(block=2, confirmed=False, date=ago(40)),  # the confirmed one never came
        record(block=2, confirmed=True, date=ago(35), stream_id=STREAM_B),  # another stream's block 2
        record(block=3, confirmed=False, date=ago(2)),  # not final yet
        record(block=4, confirmed=False, date=ago(40)), record(block=4, confirmed=True, date=ago(35), **FAILED),
        record(block=5, confirmed=False, date=ago(40), **FAILED), record(block=5, confirmed=True, date=ago(35), **FAILED),
        record(block=6, confirmed=False, date=ago(40), chain="0x89"), record(block=6, confirmed=True, date=ago(38)),
    )
    return {(d.stream_id, d.block_number, bool(d.confirmed)): d for d in Delivery.objects.all()}  # type: ignore[misc]


def test_it_finds_missing_and_failing_confirmed_deliveries(plain_source: Source) -> None:
    rows = blocks(plain_source)
    now = timezone.now()
    Source.objects.filter(pk=plain_source.pk).update(synced_through=now)
    gaps = confirmation_gaps(now - timedelta(days=1), now, grace=timedelta(minutes=10))
    found = {(g.kind, g.unconfirmed.block_number, g.confirmed.pk if g.confirmed else None) for g in gaps}
    assert found == {
        ("missing", 2, None),
        ("failed", 4, rows[(STREAM_A, 4, True)].pk),
        # block 6's confirmed delivery is on chain 0x1, not on the unconfirmed one's chain 0x89
        ("missing", 6, None),
    }


def test_a_block_counts_only_once_the_polls_have_read_past_its_finality(plain_source: Source) -> None:
    blocks(plain_source)
    now = timezone.now()
    # Polled up to 42 minutes ago: the block-2 delivery (40 min ago) is not yet due its confirmation.
    Source.objects.filter(pk=plain_source.pk).update(synced_through=now - timedelta(minutes=42))
    assert [g.kind for g in confirmation_gaps(now - timedelta(days=1), now, grace=timedelta(0))] == ["failed"]
    Source.objects.filter(pk=plain_source.pk).update(synced_through=None)
    assert [g.kind for g in confirmation_gaps(now - timedelta(days=1), now, grace=timedelta(0))] == ["failed"]
    # Ethereum's finality (12 confirmations × 12 s) and a grace of 40 min put block 2 (40 min old) out of reach.
    Source.objects.filter(pk=plain_source.pk).update(synced_through=now)
    assert {g.unconfirmed.block_number for g in confirmation_gaps(
        now - timedelta(days=1), now, grace=timedelta(minutes=40)) if g.kind == "missing"} == set()


def test_the_page_lists_the_gaps_and_the_delivery_page_its_pair(
    plain_source: Source, logged_in_client: Client, settings: Any
) -> None:
    settings.CONFIRMATION_GRACE_SECONDS = 0
    rows = blocks(plain_source)
    Source.objects.filter(pk=plain_source.pk).update(synced_through=timezone.now())
    response = logged_in_client.get("/deliveries/confirmation-gaps/", {"range": "24h"})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.count("confirmed never came</span>") == 2 and "confirmed failed</span>" in body
    assert rows[(STREAM_A, 4, True)].get_absolute_url() in body
    assert logged_in_client.get("/deliveries/confirmation-gaps/", {"range": "1y"}).status_code == 400

    page = logged_in_client.get(rows[(STREAM_A, 1, False)].get_absolute_url()).content.decode()
    assert f'href="{rows[(STREAM_A, 1, True)].get_absolute_url()}"' in page
    lonely = logged_in_client.get(rows[(STREAM_A, 2, False)].get_absolute_url()).content.decode()
    assert "no confirmed delivery stored" in lonely


def test_the_pair_and_the_gaps_are_read_through_indexes(plain_source: Source) -> None:
    from dashboard.devtools.generator import generate_deliveries

    # 90 days of history, and the page's default day: the window holds about 1 % of the rows, as it does in
    # production (a 7-day window over 30 days of 20 k rows is a quarter of the table, where a scan is right).
    made = generate_deliveries(20_000, seed="pairs", days=90, analyze=True)
    now = timezone.now()
    Source.objects.filter(pk=made.source.pk).update(synced_through=now)
    with CaptureQueriesContext(connection) as captured:
        confirmation_gaps(now - timedelta(days=1), now, grace=timedelta(minutes=10))
        delivery = Delivery.objects.order_by("-date").first()
        assert delivery is not None
        list(Delivery.objects.pair_of(delivery))
    window_weeks = {partitions.partition_name(partitions.week_of(moment)) for moment in (now - timedelta(days=1), now)}
    for query in captured.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + query["sql"])
            plan = readable_plan("\n".join(line for (line,) in cursor.fetchall()))
        if "deliveries_delivery" in query["sql"]:
            # Only the week partitions holding the day may be scanned whole (a week's rows at most); no other.
            scanned = set(re.findall(r"Seq Scan on (deliveries_delivery\w*)", plan))
            assert scanned <= window_weeks, plan
