from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.deliveries.models import Delivery, ErrorGroup, ErrorMessage, Stream
from dashboard.sources.models import Source
from tests.web.conftest import ADDR, STREAM_A, STREAM_B, TX, URL_B, record, store

pytestmark = pytest.mark.django_db


def test_error_groups_with_counts_sparklines_and_affected_slices(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(hours=1), error="connect ECONNREFUSED 10.0.0.1:443", retries=1),
        record(date=now - timedelta(hours=30), stream_id=STREAM_B, tag="beta", url=URL_B,
               error="connect ECONNREFUSED 10.0.0.2:8443", retries=3),
        record(date=now - timedelta(hours=2), error="<script>alert(1)</script>", retries=1),
        record(date=now - timedelta(hours=2)),
    )
    # session, user, the viewer role (user and group permissions), sync banner, the groups
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the event menu (the decoded event names of the event rollup, one skip scan of its index)
    # + the 7-day window's slices and buckets, one grouping-sets query of each table it reads: the hourly rollups
    # of its edge hours and the period rollups of its whole six-hour periods (deliveries.rollup_window)
    with django_assert_num_queries(10):
        response = logged_in_client.get("/errors/")
    entries = response.context["entries"]
    first = entries[0]
    assert first["group"].template == "connect ECONNREFUSED <ip>"
    assert first["stats"].total == 2
    assert first["stats"].tags == {"alpha", "beta"} and first["stats"].urls == {URL_B, "https://hooks.example.com/a"}
    assert first["spark"].peak == 1
    body = response.content.decode()
    assert f"/deliveries/?group={first['group'].pk}" in body
    assert "&lt;script&gt;alert(" in body and "<script>alert(" not in body

    day = logged_in_client.get("/errors/?range=24h").context["entries"]
    assert {e["stats"].total for e in day} == {1}
    only_beta = logged_in_client.get("/errors/?tag=beta").context["entries"]
    assert [e["stats"].total for e in only_beta] == [1]


def test_retry_statistics_per_stream_and_tag(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(hours=3)),
        record(date=now - timedelta(hours=3), retries=1),  # delivered after 1 min
        record(date=now - timedelta(hours=3), retries=2),  # delivered after 11 min
        record(date=now - timedelta(hours=3), retries=3),  # delivered after 1 h 11 min
        record(date=now - timedelta(hours=2), error="socket hang up", retries=2),
        record(date=now - timedelta(days=3), stream_id=STREAM_B, tag="beta", error="socket hang up", retries=7),
    )
    # session, user, the viewer role (user and group permissions), sync banner, distribution, the replays that
    # delivered (exact times to success), still-failing deliveries
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the 7-day distribution read twice: hourly rollups of the edge hours, period rollups of the whole periods
    # + the provider's status of the still-failing deliveries' streams (retries stopped where not active)
    with django_assert_num_queries(11):
        response = logged_in_client.get("/retries/")
    rows = {r.key: r for r in response.context["rows"]}
    a = rows["11111111-1111-4111-8111-111111111111"]
    assert a.distribution == [1, 1, 2, 1, 0, 0, 0, 0]
    assert a.eventually_share == 100.0
    assert a.median_time_to_success == 660
    assert a.retrying == 1
    b = rows[STREAM_B]
    assert b.failed == 1 and b.eventually_share == 0.0
    failing = response.context["still_failing"]
    assert len(failing) == 1
    assert failing[0].schedule.next_retry == failing[0].date + timedelta(seconds=4260)
    assert failing[0].schedule.runs_out == failing[0].date + timedelta(seconds=162660)
    # The third attempt was due 49 min ago; its result comes with the next revisit, so it reads as due.
    assert "(due 49 min ago)" in response.content.decode()

    by_tag = logged_in_client.get("/retries/?by=tag").context["rows"]
    assert {r.key for r in by_tag} == {"alpha", "beta"}
    assert logged_in_client.get("/retries/?range=24h").context["overall"].total == 5


def test_search_finds_deliveries_through_search_keys(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries: Any
) -> None:
    stored = store(plain_source, record(block=777), record(block=778, payload={"block": {"number": "778"}}))
    hit = next(d for d in stored if d.block_number == 777)
    # session, user, the viewer role (user and group permissions), sync banner, the partitions (whose most
    # common keys, read by the first search of the process, are then known), the ids holding the key (read
    # through the search index), the matching deliveries
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    logged_in_client.get("/search/", {"q": "778"})
    with django_assert_num_queries(9):
        response = logged_in_client.get(f"/search/?q={TX.upper().replace('0X', '0x')}")
    assert [d.pk for d in response.context["deliveries"]] == [hit.pk]
    for q in (ADDR, "777", f"tx:{TX}", f"address:{ADDR}"):
        found = logged_in_client.get("/search/", {"q": q}).context["deliveries"]
        assert [d.pk for d in found] == [hit.pk], q
    assert logged_in_client.get("/search/?q=999").context["deliveries"] == []
    empty = logged_in_client.get("/search/")
    assert empty.status_code == 200 and "block number" in empty.content.decode()


def test_a_bad_search_explains_what_is_expected(logged_in_client: Client) -> None:
    for q in ("0x123", "12345678901234567890123", "tx:nothing"):
        response = logged_in_client.get("/search/", {"q": q})
        assert response.status_code == 400, q
        assert "is not a search key" in response.content.decode(), q


def test_ids_and_error_text_in_the_search_box_lead_to_the_delivery_or_the_list(
    plain_source: Source, logged_in_client: Client
) -> None:
    (delivery,) = store(plain_source, record(error="certificate has expired", retries=1))

    response = logged_in_client.get("/search/", {"q": str(delivery.pk).upper()})
    assert response.status_code == 302 and response["Location"] == f"/deliveries/{delivery.pk}/"
    response = logged_in_client.get("/search/", {"q": STREAM_A})
    assert response.status_code == 302 and response["Location"] == f"/deliveries/?stream={STREAM_A}"
    response = logged_in_client.get("/search/", {"q": "certificate has  expired"}, follow=True)
    assert [d.pk for d in response.context["deliveries"]] == [delivery.pk]
    assert response.redirect_chain == [("/deliveries/?status=failing&error=certificate+has+expired", 302)]

    # An id nobody has: the page says so, in words, without the field's name.
    for q in ("00000000-0000-4000-8000-000000000000", "stream:00000000-0000-4000-8000-000000000000"):
        response = logged_in_client.get("/search/", {"q": q})
        body = response.content.decode()
        assert response.status_code == 400
        assert "no delivery or stream with this id" in body.lower() or "no stream with this id" in body.lower(), q
        assert "is not a search key" not in body and "Q:" not in body


def test_messages_name_no_raw_field_and_show_invisible_characters(logged_in_client: Client) -> None:
    response = logged_in_client.get("/search/", {"q": "\u202ex"})
    assert response.status_code == 400
    errors = response.context["errors"]
    assert errors and all(not e.startswith("Q:") and "\u202e" not in e for e in errors), errors
    assert any("\u27e8U+202E\u27e9x" in e for e in errors), errors
    response = logged_in_client.get("/deliveries/", {"q": "0x12", "url": "x" * 3000, "range": "\u202e1h"})
    errors = response.context["errors"]
    assert response.status_code == 400 and len(errors) == 3
    assert [e.split(":")[0] for e in errors] == ["Range", "URL", "Search"]
    assert all("\u202e" not in e for e in errors) and "\u27e8U+202E\u27e9" in errors[0]


def test_the_list_of_an_error_group_names_it(plain_source: Source, logged_in_client: Client) -> None:
    store(plain_source, record(error="socket hang up", retries=1))
    group = ErrorGroup.objects.get()
    body = logged_in_client.get(f"/deliveries/?group={group.pk}").content.decode()
    assert "Error group:" in body and "socket hang up" in body


def test_failing_beside_a_group_or_an_error_text_is_implied_not_queried(
    plain_source: Source, logged_in_client: Client
) -> None:
    """Rows of an error group, or with an error text, are failing: the list shows the same rows with or without
    `status=failing`, and its queries filter by the group alone (its count then reads the group's index only);
    `status=failed` still narrows."""
    now = timezone.now()
    store(plain_source, *(record(date=now - timedelta(minutes=i), error="socket hang up", retries=i % 9)
                          for i in range(12)), record(date=now))
    group = ErrorGroup.objects.get()
    for query in ({"group": str(group.pk)}, {"error": "hang up"}):
        with ExitStack() as stack:
            # Every alias: the list reads the replica's when one is configured.
            captured = [stack.enter_context(CaptureQueriesContext(c)) for c in connections.all()]
            failing = logged_in_client.get("/deliveries/", {**query, "status": "failing"})
        # Read before the next request, which empties the connections' query logs.
        reads = [q["sql"] for c in captured for q in c.captured_queries if 'FROM "deliveries_delivery"' in q["sql"]]
        assert reads and all('"status" IN' not in sql for sql in reads), reads
        plain = logged_in_client.get("/deliveries/", query)
        assert failing.context["matched"].rows == plain.context["matched"].rows == 12
        assert [d.pk for d in failing.context["deliveries"]] == [d.pk for d in plain.context["deliveries"]]
        failed = logged_in_client.get("/deliveries/", {**query, "status": "failed"})
        assert 0 < failed.context["matched"].rows == Delivery.objects.filter(status="failed").count() < 12


def test_error_text_with_a_variable_part_finds_the_deliveries_of_each_message_holding_it(
    plain_source: Source, logged_in_client: Client
) -> None:
    """One error group ("connect ECONNREFUSED <IP>"), two messages: the oldest 50 deliveries to one address, the
    newest 100 to another. Each address finds exactly its own deliveries, whatever their age."""
    now = timezone.now()
    store(plain_source, *(
        record(date=now - timedelta(minutes=i), retries=1,
               error=f"connect ECONNREFUSED {'10.0.0.2' if i < 100 else '10.0.0.1'}:443")
        for i in range(150)
    ))
    assert ErrorGroup.objects.count() == 1
    assert ErrorMessage.objects.count() == 2
    for address, rows in (("10.0.0.2", 100), ("10.0.0.1", 50)):
        response = logged_in_client.get("/deliveries/", {"status": "failing", "error": f"econnrefused  {address}"})
        assert response.status_code == 200
        assert response.context["matched"].rows == rows
        assert {d.error_message for d in response.context["deliveries"]} == {f"connect ECONNREFUSED {address}:443"}
    nothing = logged_in_client.get("/deliveries/", {"status": "failing", "error": "ECONNREFUSED 10.0.0.3"})
    assert nothing.context["matched"].rows == 0


def test_error_text_is_looked_for_among_each_groups_newest_messages(
    plain_source: Source, logged_in_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """150 messages of one group, one delivery each (message i dated i minutes ago). With the bound at 100
    messages a group, "10.0.0.1" is found in the newest 100 only (10.0.0.1 and 10.0.0.10–19, not 10.0.0.100–149);
    with at most 5 messages listed, the deliveries of the newest 5 of those."""
    from dashboard.deliveries import search

    now = timezone.now()
    store(plain_source, *(
        record(date=now - timedelta(minutes=i), retries=1, error=f"connect ECONNREFUSED 10.0.0.{i}:443")
        for i in range(150)
    ))
    assert ErrorMessage.objects.count() == 150
    found = search.search_error_text(Delivery.objects.all(), "ECONNREFUSED 10.0.0.1")
    assert found.deliveries.count() == 61 and "61 messages" in found.note
    monkeypatch.setattr(search, "ERROR_TEXT_SCAN_MESSAGES", 100)
    found = search.search_error_text(Delivery.objects.all(), "ECONNREFUSED 10.0.0.1")
    assert found.deliveries.count() == 11
    monkeypatch.setattr(search, "ERROR_MESSAGES_MAX", 5)
    found = search.search_error_text(Delivery.objects.all(), "ECONNREFUSED 10.0.0.1")
    assert set(found.deliveries.values_list("error_message", flat=True)) == {
        f"connect ECONNREFUSED 10.0.0.{i}:443" for i in (1, 10, 11, 12, 13)
    }
    assert "the newest 5 messages" in found.note


@pytest.mark.parametrize("status", ["terminated", "error", "paused"])
def test_deliveries_of_a_stream_not_active_at_the_provider_are_not_shown_as_retrying(
    plain_source: Source, logged_in_client: Client, status: str
) -> None:
    now = timezone.now()
    (failing,) = store(plain_source, record(date=now - timedelta(minutes=5), error="socket hang up", retries=1))
    Stream.objects.filter(stream_id=failing.stream_id).update(provider_status=status)
    stopped = f"retries stopped: stream {status} at the provider"

    response = logged_in_client.get("/retries/")
    (row,) = response.context["still_failing"]
    assert row.schedule.next_retry is None and stopped in response.content.decode()
    listed = logged_in_client.get("/deliveries/").content.decode()
    assert f'<td class="next-retry"><span class="warn retries-stopped">{stopped}</span></td>' in listed
    detail = logged_in_client.get(f"/deliveries/{failing.pk}/").content.decode()
    assert stopped.capitalize() in detail and "Next attempt" not in detail

    Stream.objects.filter(stream_id=failing.stream_id).update(provider_status="active")
    (row,) = logged_in_client.get("/retries/").context["still_failing"]
    assert row.schedule.next_retry == failing.date + timedelta(seconds=660)
    assert stopped not in logged_in_client.get("/deliveries/").content.decode()
    assert "Next attempt" in logged_in_client.get(f"/deliveries/{failing.pk}/").content.decode()


def test_a_bare_event_name_in_the_search_box_is_looked_for_as_the_event(
    plain_source: Source, logged_in_client: Client
) -> None:
    from tests.web.test_decoded_payload import payload

    (holding,) = store(plain_source, record(date=timezone.now() - timedelta(minutes=5), payload=payload()))
    assert "event:transfer" in holding.search_keys
    response = logged_in_client.get("/search/", {"q": "Transfer"})
    assert response.status_code == 302
    assert response["Location"] == "/search/?q=event%3ATransfer&word=Transfer"
    page = logged_in_client.get(response["Location"])
    assert [d.pk for d in page.context["deliveries"]] == [holding.pk]
    body = " ".join(page.content.decode().split())
    assert "“Transfer” is the name of a decoded event" in body and "error:Transfer" in body
    # A word no delivery holds as an event is still error text.
    assert logged_in_client.get("/search/", {"q": "Transferred"})["Location"].startswith("/deliveries/?")


def test_the_search_box_placeholder_is_short_enough_to_show_whole(logged_in_client: Client) -> None:
    body = logged_in_client.get("/search/").content.decode()
    placeholder = body.split('name="q" maxlength="200"', 1)[1].split('placeholder="', 1)[1].split('"', 1)[0]
    # The box narrows to 200 px, 30 of them the icon: about 24 characters of 13 px text fit; its title says all.
    assert len(placeholder) <= 24, placeholder
