"""The read endpoints answer what the pages show: the deliveries list's rows for the same filters (its form),
walked in keyset pages; a delivery's payload, decoded events and attempts; streams; error groups; incidents."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.api.conftest import STREAM, World, bearer, token_for
from tests.conftest import make_user
from tests.deliveries.test_decoding import ALICE, BOB, ERC20_TRANSFER, TRANSFER, USDC, topic, w
from tests.factories import history_record, make_source, store

pytestmark = pytest.mark.django_db

TX = "0x" + "ab" * 32


@pytest.fixture
def client(db: None) -> Client:
    return bearer(token_for(make_user("ops"), ["read"]))


def _walk(client: Client, url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    pages = 0
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        items.extend(body["items"])
        url = body["next"]
        pages += 1
        assert pages < 50
    return items


@pytest.fixture
def many(db: None) -> None:
    source = make_source()
    now = timezone.now()
    records = []
    for n in range(23):
        records.append(history_record(
            date=now - timedelta(minutes=n + 1), tag="orders" if n % 2 else "swaps",
            error="HTTP 500 from receiver" if n % 3 == 0 else "", retries=n % 4, confirmed=n % 5 != 0,
            block=19_000_000 + n, stream_id=STREAM if n % 2 else "1e1e1e1e-0000-4000-8000-000000000001",
        ))
    store(source, *records)


@pytest.mark.parametrize(
    "query",
    ["", "status=failing", "status=delivered&tag=orders", f"stream={STREAM}&retries=2", "confirmed=false",
     "order=oldest", "q=block:19000004", "error=receiver&range=24h", "chain=eth&status=retrying"],
)
def test_the_list_matches_the_page_for_the_same_filters(many: None, client: Client, query: str) -> None:
    page = Client()
    page.force_login(make_user("vera"))
    shown = page.get(f"/deliveries/?{query}")
    assert shown.status_code == 200
    expected = [str(d.id) for d in shown.context["deliveries"]]
    got = _walk(client, f"/api/v1/deliveries?{query}&limit=4".replace("?&", "?"))
    assert [item["id"] for item in got] == expected
    assert len(set(expected)) == len(expected)


def test_a_page_has_at_most_limit_rows_and_an_opaque_next(many: None, client: Client) -> None:
    body = client.get("/api/v1/deliveries?status=failing&limit=5").json()
    assert len(body["items"]) == 5
    assert body["next_cursor"] and body["next"].startswith("/api/v1/deliveries?status=failing&limit=5&cursor=")
    last = client.get("/api/v1/deliveries?limit=200").json()
    assert last["next"] is None and len(last["items"]) == 23


def test_a_delivery_with_its_payload_decoded_events_and_attempts(client: Client) -> None:
    payload = {
        "block": {"number": "100", "hash": "0x" + "12" * 32, "timestamp": "1700000000"},
        "chainId": "0x1",
        "abi": [ERC20_TRANSFER],
        "logs": [{"logIndex": "4", "transactionHash": TX, "address": USDC, "topic0": TRANSFER,
                  "topic1": topic(ALICE), "topic2": topic(BOB), "topic3": None, "data": "0x" + w(1_250_500_000)}],
    }
    store(make_source(), history_record(payload=payload, error="HTTP 502", retries=1))
    item = client.get("/api/v1/deliveries").json()["items"][0]
    detail = client.get(f"/api/v1/deliveries/{item['id']}").json()
    assert detail["payload"] == payload
    [event] = detail["decoded_events"]
    assert event["event"] == "Transfer(address,address,uint256)"
    assert [(a["name"], a["value"]) for a in event["args"]] == [
        ("from", ALICE.lower()), ("to", BOB.lower()), ("value", "1250500000")
    ]
    assert [a["succeeded"] for a in detail["attempts"]] == [False, False]


def test_streams_list_and_detail(world: World, client: Client) -> None:
    [stream] = client.get("/api/v1/streams").json()["items"]
    assert stream["stream_id"] == STREAM
    assert stream["deliveries_24h"] == 3 and stream["failing_24h"] == 2
    assert stream["health"]["webhook_url"] == "https://hooks.example.com/moralis"
    detail = client.get(f"/api/v1/streams/{STREAM}").json()
    assert detail["stored"]["stored"] == 3
    assert client.get("/api/v1/streams/unknown").status_code == 404


def test_error_groups_and_incidents(world: World, client: Client) -> None:
    [group] = client.get("/api/v1/error-groups").json()["items"]
    assert group["id"] == world.group_id and group["delivery_count"] == 2 and group["failures"] == 2
    assert group["streams"] == [STREAM] and group["tags"] == ["orders"]
    assert client.get(f"/api/v1/error-groups/{world.group_id}").json()["template"] == group["template"]
    incidents = client.get("/api/v1/incidents?state=open").json()["items"]
    assert [i["id"] for i in incidents] == [world.incident.pk]
    assert client.get("/api/v1/incidents?state=resolved").json()["items"] == []
    assert client.get(f"/api/v1/incidents/{world.incident.pk}").json()["events"] == []


def test_incidents_walk_in_pages(world: World, client: Client) -> None:
    from dashboard.alerts.models import Incident

    now = timezone.now()
    for n in range(6):
        Incident.objects.create(
            rule=world.incident.rule, target_kind="stream", target_key=f"s{n}", summary=f"old {n}",
            opened_at=now - timedelta(hours=n + 1), last_holding_at=now, message_id=f"<o{n}@x>", resolved_at=now,
        )
    walked = _walk(client, "/api/v1/incidents?limit=2")
    assert [i["id"] for i in walked] == list(Incident.objects.order_by("-opened_at", "-id").values_list("id", flat=True))


@pytest.mark.parametrize("query", ["", "range=24h", "tag=orders", "tag=swaps&range=30d", "range=1h", "event=Transfer"])
def test_error_groups_match_the_page_for_the_same_filters(many: None, client: Client, query: str) -> None:
    store(make_source("second"), *[
        history_record(date=timezone.now() - timedelta(hours=n + 2), error=f"timeout after {n} s", tag="swaps")
        for n in range(5)
    ])
    page = Client()
    page.force_login(make_user("vera"))
    shown = page.get(f"/errors/?{query}")
    assert shown.status_code == 200
    expected = [(e["group"].pk, e["stats"].total) for e in shown.context["entries"]]
    got = _walk(client, f"/api/v1/error-groups?{query}&limit=1".replace("?&", "?"))
    assert [(g["id"], g["failures"]) for g in got] == expected


def test_a_delivery_reads_the_providers_logs_only_when_asked(source: Any, client: Client) -> None:
    store(source, history_record(error="HTTP 502", retries=1))
    item = client.get("/api/v1/deliveries").json()["items"][0]
    assert client.get(f"/api/v1/deliveries/{item['id']}").json()["logs_read"] is False
    detail = client.get(f"/api/v1/deliveries/{item['id']}?logs=true").json()
    assert detail["logs_read"] is True and detail["logs_error"] == ""
    assert client.get(f"/api/v1/deliveries/{item['id']}?logs=maybe").status_code == 400


def test_streams_walk_in_the_pages_order(many: None, client: Client) -> None:
    page = Client()
    page.force_login(make_user("vera"))
    expected = [e["stats"].key for e in page.get("/streams/").context["entries"]]
    assert len(expected) == 2
    assert [s["stream_id"] for s in _walk(client, "/api/v1/streams?limit=1")] == expected
    assert client.get("/api/v1/streams?cursor=bm9wZQ").status_code == 400
