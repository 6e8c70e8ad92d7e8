"""The timeline and error-group pages sliced by decoded event name (`?event=Transfer`): the counts they
show are those of the raw rows holding the event's search key, whether read from the event rollup (a day
or more) or from raw rows (shorter windows); the rollup stays exact through ingest updates, the search-key
refresh, the rebuild and retention."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.deliveries.models import Delivery, ErrorGroup, EventRollup, HourlyRollup
from dashboard.deliveries.rebuild import rebuild_derived
from dashboard.deliveries.rekey import refresh_search_keys
from dashboard.deliveries.retention import enforce_retention
from dashboard.sources.models import Source
from tests.web.conftest import STREAM_A, STREAM_B, URL_B, record, store
from tests.web.test_decoded_payload import payload

pytestmark = pytest.mark.django_db

ERRORS = ("Request failed with status code 500", "timeout of 10000ms exceeded", "socket hang up")


def with_transfer_and_batch() -> dict[str, Any]:
    return payload()


def batch_only() -> dict[str, Any]:
    return payload(logs=payload()["logs"][1:], txs=[])


def undecoded() -> dict[str, Any]:
    return payload(abi=None)


def mixed_history(source: Source, now: datetime) -> None:
    """Deliveries over three days, two streams, three payload kinds and three error texts (some delivered)."""
    kinds = (with_transfer_and_batch, batch_only, undecoded)
    records = []
    for i in range(60):
        error = ERRORS[i % 3] if i % 4 != 0 else ""
        records.append(record(
            date=now - timedelta(minutes=7 + 71 * i), stream_id=STREAM_A if i % 2 else STREAM_B,
            url=URL_B if i % 2 == 0 else "https://hooks.example.com/a", tag="alpha" if i % 2 else "beta",
            error=error, retries=1 + i % 5 if error else 0, block=1000 + i, payload=kinds[i % 5 % 3](),
        ))
    store(source, *records)


def raw_counts(event: str | None, since: datetime, until: datetime, **slice_: Any) -> Counter[str]:
    """Delivered and failing rows of the window holding the event's key, read the obvious way."""
    rows = Delivery.objects.filter(date__gte=since, date__lt=until, is_test=False, **slice_)
    if event:
        rows = rows.filter(search_keys__contains=[f"event:{event}"])
    return Counter("delivered" if d.status == "delivered" else "failed" for d in rows)


def raw_groups(event: str | None, since: datetime, until: datetime) -> dict[int, int]:
    rows = Delivery.objects.filter(date__gte=since, date__lt=until, is_test=False).exclude(error_group=None)
    if event:
        rows = rows.filter(search_keys__contains=[f"event:{event}"])
    return dict(Counter(d.error_group_id for d in rows))


def rollup_rows() -> list[tuple[Any, ...]]:
    return sorted(EventRollup.objects.values_list(
        "source_id", "hour", "stream_id", "tag", "webhook_url", "chain_id", "status", "error_group_id", "retries",
        "event", "deliveries"))


@pytest.mark.parametrize("event", ["transfer", "transferbatch", None])
@pytest.mark.parametrize("range_", ["1h", "24h", "7d"])
def test_the_timeline_counts_what_the_raw_rows_hold(
    plain_source: Source, logged_in_client: Client, event: str | None, range_: str
) -> None:
    now = timezone.now()
    mixed_history(plain_source, now)
    response = logged_in_client.get("/timeline/", {"range": range_, **({"event": event} if event else {})})
    assert response.status_code == 200
    timeline = response.context["timeline"]
    assert timeline.from_rollups is (range_ != "1h")
    # The chart's buckets start at a whole bucket before the window: the truth is counted over the same span.
    truth = raw_counts(event, timeline.buckets[0].start, now + timedelta(seconds=1))
    assert (timeline.chart.delivered, timeline.chart.failed) == (truth["delivered"], truth["failed"])
    if range_ == "7d":
        assert truth["delivered"] and truth["failed"]


def test_the_timeline_slices_by_event_and_stream_together(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    mixed_history(plain_source, now)
    response = logged_in_client.get("/timeline/", {"range": "7d", "event": "TransferBatch", "stream": STREAM_A})
    timeline = response.context["timeline"]
    truth = raw_counts("transferbatch", timeline.buckets[0].start, now + timedelta(seconds=1), stream_id=STREAM_A)
    assert (timeline.chart.delivered, timeline.chart.failed) == (truth["delivered"], truth["failed"])
    assert 0 < sum(truth.values()) < Delivery.objects.filter(stream_id=STREAM_A).count()
    body = response.content.decode()
    # The menu offers the decoded events present; the chosen one (any spelling) is selected.
    assert response.context["events"] == ["transfer", "transferbatch"]
    assert '<option value="transferbatch" selected>TransferBatch</option>' in body
    # Shown as the contracts spell them, not as the search keys store them.
    assert '<option value="transfer" >Transfer</option>' in body
    assert 'holding event <span class="mono">TransferBatch</span>' in body
    # A bar links to the list of exactly that slice: the event through its search key.
    bar = next(b for b in timeline.chart.bars if b.fail_h)
    assert "q=event%3Atransferbatch" in bar.fail_href
    listed = logged_in_client.get(bar.fail_href)
    assert listed.status_code == 200
    assert all("event:transferbatch" in d.search_keys for d in Delivery.objects.filter(
        pk__in=[d.pk for d in listed.context["deliveries"]]).only("search_keys"))


def test_error_groups_count_the_failures_holding_the_event(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    mixed_history(plain_source, now)
    for event in ("transfer", "transferbatch", None):
        response = logged_in_client.get("/errors/", {"range": "7d", **({"event": event} if event else {})})
        assert response.status_code == 200
        window = response.context["window"]
        shown = {e["group"].pk: e["stats"].total for e in response.context["entries"]}
        assert shown == raw_groups(event, HourlyRollup.hour_of(window.start), now + timedelta(seconds=1)), event
        assert shown
    sliced = {e["group"].pk: e["stats"].total for e in response.context["entries"]}
    transfer = logged_in_client.get("/errors/", {"range": "7d", "event": "Transfer"})
    only = {e["group"].pk: e["stats"].total for e in transfer.context["entries"]}
    assert sum(only.values()) < sum(sliced.values())
    body = transfer.content.decode()
    assert '<option value="transfer" selected>Transfer</option>' in body
    assert 'holding event <span class="mono">Transfer</span>' in body
    assert "q=event:transfer" in body


def test_a_bad_event_name_is_a_400_that_quotes_it_escaped(plain_source: Source, logged_in_client: Client) -> None:
    for page in ("/timeline/", "/errors/"):
        response = logged_in_client.get(page, {"event": "<b>x</b>"})
        assert response.status_code == 400
        body = response.content.decode()
        assert "is not an event name" in body and "<b>x</b>" not in body


def test_the_event_rollup_follows_updates_rekeys_rebuilds_and_retention(plain_source: Source, settings: Any) -> None:
    now = timezone.now()
    mixed_history(plain_source, now)

    def sums() -> dict[tuple[str, str], int]:
        totals: Counter[tuple[str, str]] = Counter()
        for event, status, n in EventRollup.objects.values_list("event", "status", "deliveries"):
            totals[(event, status)] += n
        return dict(totals)

    def truth() -> dict[tuple[str, str], int]:
        totals: Counter[tuple[str, str]] = Counter()
        for d in Delivery.objects.filter(is_test=False):
            for key in d.search_keys:
                if key.startswith("event:"):
                    totals[(key[6:], d.status)] += 1
        return dict(totals)

    assert sums() == truth()
    # A retry that succeeds moves its row from failing to delivered in both tables.
    failing = Delivery.objects.exclude(status="delivered").filter(search_keys__contains=["event:transfer"]).first()
    assert failing is not None
    store(plain_source, record(date=failing.date, stream_id=failing.stream_id, url=failing.webhook_url,
                               tag=failing.tag, block=failing.block_number or 0, retries=failing.retries + 1,
                               payload=failing.payload) | {"id": str(failing.pk)})
    assert Delivery.objects.get(pk=failing.pk).status == "delivered"
    assert sums() == truth()

    # Rows stored before their events were decoded get them from the key refresh, rollups included.
    Delivery.objects.update(search_keys=[])
    rebuild_derived(plain_source.pk)
    assert not EventRollup.objects.exists() and HourlyRollup.objects.exists()
    for _ in refresh_search_keys(batch_size=7):
        pass
    assert sums() == truth() and sums()

    # The rebuild writes exactly what ingest wrote.
    before = rollup_rows()
    rebuild_derived(plain_source.pk)
    assert rollup_rows() == before

    # Retention drops event rollups with the hourly ones, at ROLLUP_RETENTION_DAYS.
    settings.HISTORY_RETENTION_DAYS = 1
    settings.ROLLUP_RETENTION_DAYS = 2
    with connection.cursor() as cursor:
        cursor.execute("UPDATE deliveries_eventrollup SET hour = hour - interval '3 days' WHERE event = 'transfer'")
    enforce_retention(now=now)
    assert not EventRollup.objects.filter(event="transfer").exists()
    assert EventRollup.objects.filter(event="transferbatch").exists()


def test_error_group_counts_stay_grouped_by_template(plain_source: Source, logged_in_client: Client) -> None:
    """The event slice reads the same groups as the plain page: every group shown exists and is failing."""
    now = timezone.now()
    mixed_history(plain_source, now)
    entries = logged_in_client.get("/errors/", {"range": "7d", "event": "transferbatch"}).context["entries"]
    templates = {e["group"].template for e in entries}
    assert templates <= set(ErrorGroup.objects.values_list("template", flat=True))
    assert len(templates) == 3
