from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.deliveries import counting, partitions
from dashboard.deliveries.counting import RowCount
from dashboard.deliveries.models import Delivery, ErrorGroup
from dashboard.deliveries.schedule import MAX_RETRIES, retry_schedule
from dashboard.sources.models import Source
from dashboard.upstream.chains import CHAINS
from tests.web.conftest import STREAM_A, STREAM_B, TX, URL_B, record, store

pytestmark = pytest.mark.django_db


def _ids(response) -> list[str]:
    return [str(d.pk) for d in response.context["deliveries"]]


def test_it_lists_newest_first_with_a_pinned_query_count(
    plain_source: Source, logged_in_client: Client, django_assert_num_queries
) -> None:
    now = timezone.now()
    stored = store(plain_source, *(record(date=now - timedelta(minutes=i)) for i in range(5)))
    # session, user, the viewer role (user and group permissions), sync banner, the bounded count of the
    # matching rows (the planner's estimate, then COUNT over LIMIT 10 001, or over LIMIT 101 where it expects twice the bound), filter menus (the stream rows),
    # the page of rows
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # + the count's time budget (COUNT_BUDGET_MS): a savepoint, setting the statement timeout, putting it back
    # (only inside a transaction, as a test runs) and releasing the savepoint
    with django_assert_num_queries(14):
        response = logged_in_client.get("/deliveries/")
    assert response.status_code == 200
    assert _ids(response) == [str(d.pk) for d in stored]


def test_each_filter_narrows_the_list(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    ok = record(date=now - timedelta(minutes=1))
    failing = record(date=now - timedelta(minutes=2), stream_id=STREAM_B, tag="beta", url=URL_B,
                     error="Request failed with status code 502", retries=3, chain="0x89", confirmed=False,
                     block=555)
    old = record(date=now - timedelta(days=3), error="timeout of 10000ms exceeded", retries=1)
    store(plain_source, ok, failing, old)
    group = ErrorGroup.objects.get(template__startswith="Request failed")

    cases = {
        f"stream={STREAM_B}": [failing],
        "tag=alpha": [ok, old],
        f"url={URL_B}": [failing],
        "status=delivered": [ok],
        "status=failing": [failing, old],
        "status=retrying": [failing, old],
        "status=failed": [],
        f"group={group.pk}": [failing],
        "error=TIMEOUT": [old],
        "chain=0x89": [failing],
        "chain=0X89": [failing],
        "chain=polygon": [failing],
        "chain=Matic": [failing],
        "confirmed=false": [failing],
        "confirmed=true": [ok, old],
        "retries=2": [failing],
        "range=24h": [ok, failing],
        "range=1h&status=failing": [failing],
        "q=555": [failing],
        f"q={TX}": [ok, failing, old],
        "order=oldest": [old, failing, ok],
        f"range=custom&start={(now - timedelta(days=4)):%Y-%m-%dT%H:%M:%S}"
        f"&end={(now - timedelta(days=2)):%Y-%m-%dT%H:%M:%S}": [old],
    }
    for query, expected in cases.items():
        response = logged_in_client.get(f"/deliveries/?{query}")
        assert response.status_code == 200, query
        assert _ids(response) == [r["id"] for r in expected], query


def test_keyset_pages_walk_every_row_once_in_both_directions(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    same_second = now - timedelta(hours=1)
    records = [record(date=now - timedelta(minutes=i)) for i in range(70)]
    # Rows sharing one timestamp must still page exactly (the id breaks ties).
    records += [record(date=same_second) for _ in range(45)]
    store(plain_source, *records)
    expected = [str(pk) for pk in Delivery.objects.newest_first().values_list("id", flat=True)]

    for order, wanted in (("newest", expected), ("oldest", expected[::-1])):
        seen: list[str] = []
        pages = []
        url = f"/deliveries/?order={order}"
        while url:
            response = logged_in_client.get(url)
            assert response.status_code == 200
            assert b"OFFSET" not in response.content
            seen += _ids(response)
            pages.append(url)
            cursor = response.context["older_cursor"]
            url = f"/deliveries/?order={order}&after={cursor}" if cursor else ""
        assert seen == wanted
        assert len(pages) == 3

        # From the last page, "before" links lead back through the same pages.
        back: list[str] = []
        response = logged_in_client.get(pages[-1])
        back = _ids(response) + back
        while response.context["newer_cursor"]:
            response = logged_in_client.get(f"/deliveries/?order={order}&before={response.context['newer_cursor']}")
            back = _ids(response) + back
        assert back == wanted


def test_the_sql_of_a_later_page_uses_no_offset(plain_source: Source, logged_in_client: Client,
                                               django_assert_max_num_queries) -> None:
    store(plain_source, *(record(date=timezone.now() - timedelta(minutes=i)) for i in range(60)))
    first = logged_in_client.get("/deliveries/")
    # as the first page, with the bounded count of the matching rows
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    # (+ the planner's estimate before the count, and the count's time budget, 4 queries in a test's
    # transaction, as above)
    with django_assert_max_num_queries(14) as captured:
        logged_in_client.get(f"/deliveries/?after={first.context['older_cursor']}")
    assert not any("OFFSET" in q["sql"] for q in captured.captured_queries)


def test_hostile_text_is_shown_as_text(plain_source: Source, logged_in_client: Client) -> None:
    store(
        plain_source,
        record(tag="<script>alert('tag')</script>", error="<script>alert('err')</script> \u202eevil",
               url="https://x.example/<img src=x onerror=alert(1)>", retries=1),
    )
    body = logged_in_client.get("/deliveries/").content.decode()
    assert "<script>alert(" not in body
    assert "<img src=x" not in body
    assert "&lt;script&gt;alert(&#x27;tag&#x27;)&lt;/script&gt;" in body
    assert "⟨U+202E⟩evil" in body


def test_the_live_refresh_answers_the_partial_only(plain_source: Source, logged_in_client: Client) -> None:
    store(plain_source, record())
    response = logged_in_client.get("/deliveries/?status=delivered", headers={"X-Live-Refresh": "1"})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="deliveries-table"' in body
    assert "<html" not in body and "topbar" not in body
    assert "X-Live-Refresh" in response["Vary"]


def _csv(response) -> list[list[str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


def test_the_export_holds_exactly_the_filtered_set(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    failing = [record(date=now - timedelta(minutes=i), error="socket hang up", retries=2) for i in range(120)]
    store(plain_source, *failing, *(record(date=now - timedelta(minutes=i)) for i in range(30)))

    response = logged_in_client.get("/deliveries/export.csv?status=failing")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = _csv(response)
    assert rows[0][:4] == ["id", "date", "stream_id", "tag"]
    assert [r[0] for r in rows[1:]] == [r["id"] for r in failing]
    assert {r[10] for r in rows[1:]} == {"retrying"}
    assert {r[11] for r in rows[1:]} == {"socket hang up"}


def test_the_export_streams_and_defuses_spreadsheet_formulas(plain_source: Source, logged_in_client: Client) -> None:
    store(plain_source, record(tag="=HYPERLINK(\"http://evil\")", error="+1 boom", retries=1))
    response = logged_in_client.get("/deliveries/export.csv")
    assert response.streaming
    rows = _csv(response)
    assert rows[1][3] == "'=HYPERLINK(\"http://evil\")"
    assert rows[1][11] == "'+1 boom"


def test_the_export_reads_in_chunks(plain_source: Source, logged_in_client: Client, monkeypatch) -> None:
    from dashboard.web.views import deliveries

    store(plain_source, *(record(date=timezone.now() - timedelta(seconds=i)) for i in range(5)))
    monkeypatch.setattr(deliveries, "EXPORT_CHUNK", 2)
    rows = _csv(logged_in_client.get("/deliveries/export.csv?order=oldest"))
    assert len(rows) == 6
    assert [r[1] for r in rows[1:]] == sorted(r[1] for r in rows[1:])


def test_the_list_counts_what_the_filter_matches_exactly_up_to_a_bound(
    plain_source: Source, logged_in_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = timezone.now()
    store(plain_source, *(record(date=now - timedelta(minutes=i), retries=i % 2, error="boom" if i % 2 else "")
                          for i in range(60)))
    response = logged_in_client.get("/deliveries/", {"status": "failing"})
    assert response.context["matched"] == RowCount(30, estimated=False)
    assert "30 matches · 30 shown" in response.content.decode()
    response = logged_in_client.get("/deliveries/")
    assert response.context["matched"] == RowCount(60, estimated=False)
    assert "60 matches · 50 shown" in response.content.decode()

    # Far beyond the bound (the planner, with fresh statistics, expects 60 rows) the count is the planner's,
    # said to be an estimate.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
    monkeypatch.setattr(counting, "EXACT_LIMIT", 20)
    response = logged_in_client.get("/deliveries/")
    matched = response.context["matched"]
    # (The planner counts at least one row for each partition it reads, empty ones too.)
    with connection.cursor() as cursor:
        weeks = len(partitions.partitions(cursor))
    assert matched.estimated and 60 <= matched.rows <= 60 + weeks, matched
    assert f"about {matched.rows}</span> matches" in response.content.decode()
    # Just beyond it, the planner's figure is not shown as the count (stale statistics would understate it):
    # all that was counted is said.
    monkeypatch.setattr(counting, "EXACT_LIMIT", 40)
    response = logged_in_client.get("/deliveries/")
    assert response.context["matched"].more_than == 40
    assert "more than 40</span> matches" in response.content.decode()


def test_retrying_rows_show_their_next_retry_from_the_schedule(plain_source: Source, logged_in_client: Client) -> None:
    now = timezone.now()
    retrying, failed, ok = store(
        plain_source,
        record(date=now - timedelta(minutes=5), error="boom", retries=1),
        record(date=now - timedelta(days=3), error="boom", retries=MAX_RETRIES),
        record(date=now - timedelta(minutes=6)),
    )
    body = logged_in_client.get("/deliveries/").content.decode()
    assert ">Next retry</th>" in body
    # Retry 1 came 1 min after the first attempt; the next is 10 min after that.
    expected = retry_schedule(retrying.date, 1).next_retry
    assert expected is not None and expected == retrying.date + timedelta(minutes=11)
    rows = body.split('<tr class="clickable"')[1:]
    by_id = {str(d.pk): next(r for r in rows if str(d.pk) in r) for d in (retrying, failed, ok)}
    assert expected.strftime("%m-%d %H:%M") in by_id[str(retrying.pk)]
    assert failed.next_retry is None and ok.next_retry is None
    assert expected.strftime("%m-%d %H:%M") not in by_id[str(failed.pk)]


def test_the_chain_filter_is_a_menu_of_the_chain_table(plain_source: Source, logged_in_client: Client) -> None:
    body = logged_in_client.get("/deliveries/", {"chain": "polygon"}).content.decode()
    menu = body[body.index('<select name="chain">'):]
    menu = menu[: menu.index("</select>")]
    assert all(f'<option value="{c.hex_id}"' in menu for c in CHAINS)
    assert '<option value="0x89" selected>' in menu
    # A chain id outside the table, from a link, stays selected.
    body = logged_in_client.get("/deliveries/", {"chain": "0x2105"}).content.decode()
    assert '<option value="0x2105" selected>0x2105</option>' in body


def test_the_filter_menus_offer_the_streams_recently_delivered_from_their_rows(
    plain_source: Source, logged_in_client: Client
) -> None:
    now = timezone.now()
    store(
        plain_source,
        record(date=now - timedelta(days=2), stream_id=STREAM_A, tag="alpha"),
        record(date=now - timedelta(days=40), stream_id=STREAM_B, tag="beta", url=URL_B),
    )
    options = logged_in_client.get("/deliveries/").context["options"]
    assert options["stream_ids"] == [STREAM_A]
    assert options["tags"] == ["alpha"]
    assert URL_B not in options["urls"] and len(options["urls"]) == 1
