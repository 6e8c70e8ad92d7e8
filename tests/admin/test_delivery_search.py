"""The admin finds a delivery by every kind of key, through the search keys, and refuses bad input with a
message."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.test import Client
from django.urls import reverse

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery
from tests.admin.conftest import (
    CONTRACT,
    FROM,
    LOG_ADDRESS,
    NOW,
    OTHER_STREAM,
    OTHER_TX,
    STREAM,
    TO,
    TOPIC,
    TRANSFER_FROM,
    TRANSFER_TO,
    TX,
    history_record,
)

URL = "/admin/deliveries/delivery/"


@pytest.fixture
def stored(plain_source: Any) -> dict[str, Delivery]:
    """One delivery per role an address or hash can play, plus unrelated ones."""
    records = {
        "tx": history_record(block=100, txs=[{"hash": TX, "fromAddress": None, "toAddress": None}]),
        "from": history_record(block=101, txs=[{"hash": OTHER_TX, "fromAddress": FROM, "toAddress": None}]),
        "to": history_record(block=102, txs=[{"hash": OTHER_TX, "fromAddress": None, "toAddress": TO}]),
        "contract": history_record(block=103, txs=[{"hash": OTHER_TX, "receiptContractAddress": CONTRACT}]),
        "log": history_record(
            block=104,
            logs=[{"transactionHash": OTHER_TX, "address": LOG_ADDRESS, "topic0": TOPIC, "topic1": None}],
        ),
        "transfer": history_record(
            block=105,
            transfers=[{"transactionHash": OTHER_TX, "from": TRANSFER_FROM, "to": TRANSFER_TO,
                        "contract": "0x" + "99" * 20}],
        ),
        "stream": history_record(block=106, stream_id=OTHER_STREAM, tag="other-stream"),
        "error": history_record(block=107, error="connect ECONNREFUSED 203.0.113.7:443", retries=2),
        "error2": history_record(block=108, error="connect ECONNREFUSED 198.51.100.23:443", retries=1),
        "timeout": history_record(block=109, error="timeout of 10000ms exceeded", retries=3),
    }
    result = store_records(plain_source, records.values(), now=NOW)
    assert result.inserted == len(records), result
    return {name: Delivery.objects.get(pk=record["id"]) for name, record in records.items()}


def found(client: Client, text: str) -> tuple[set[str], str]:
    response = client.get(URL, {"q": text})
    assert response.status_code == 200
    body = response.content.decode()
    return {pk for pk in (str(d.pk) for d in Delivery.objects.all()) if pk in body}, body


def only(stored: dict[str, Delivery], *names: str) -> set[str]:
    return {str(stored[name].pk) for name in names}


def test_it_finds_a_transaction_hash_in_any_case(staff_client: Client, stored: dict[str, Delivery]) -> None:
    assert found(staff_client, TX)[0] == only(stored, "tx")
    assert found(staff_client, "  " + TX.upper().replace("0X", "0x") + " ")[0] == only(stored, "tx")
    assert found(staff_client, f"tx:{TX}")[0] == only(stored, "tx")


@pytest.mark.parametrize(
    ("address", "name"),
    [(FROM, "from"), (TO, "to"), (CONTRACT, "contract"), (LOG_ADDRESS, "log"), (TRANSFER_FROM, "transfer"),
     (TRANSFER_TO, "transfer")],
)
def test_it_finds_an_address_in_every_role_and_case(
    staff_client: Client, stored: dict[str, Delivery], address: str, name: str
) -> None:
    for text in (address, address.lower(), "0x" + address[2:].upper(), f"address:{address}"):
        assert found(staff_client, text)[0] == only(stored, name), text


def test_it_finds_a_topic(staff_client: Client, stored: dict[str, Delivery]) -> None:
    assert found(staff_client, TOPIC)[0] == only(stored, "log")
    assert found(staff_client, f"topic:{TOPIC.upper().replace('0X', '0x')}")[0] == only(stored, "log")


def test_it_finds_a_block_number(staff_client: Client, stored: dict[str, Delivery]) -> None:
    assert found(staff_client, "104")[0] == only(stored, "log")
    assert found(staff_client, "block:0000105")[0] == only(stored, "transfer")


def test_it_finds_a_stream_and_a_delivery_by_id(staff_client: Client, stored: dict[str, Delivery]) -> None:
    assert found(staff_client, OTHER_STREAM.upper())[0] == only(stored, "stream")
    assert found(staff_client, f"stream:{OTHER_STREAM}")[0] == only(stored, "stream")
    assert len(found(staff_client, f"stream:{STREAM}")[0]) == len(stored) - 1
    pk = str(stored["timeout"].pk)
    assert found(staff_client, pk)[0] == {pk}
    assert found(staff_client, f"id:{pk}")[0] == {pk}


def test_it_finds_error_text_through_error_groups(staff_client: Client, stored: dict[str, Delivery]) -> None:
    # Words of the template: every delivery of the group.
    pks, body = found(staff_client, "ECONNREFUSED")
    assert pks == only(stored, "error", "error2")
    assert "1 error group match" in body
    # Variable parts (the IP) narrow it down to the exact message.
    assert found(staff_client, "ECONNREFUSED 203.0.113.7")[0] == only(stored, "error")
    assert found(staff_client, "error: 198.51.100.23")[0] == only(stored, "error2")
    assert found(staff_client, "error:Timeout of 10000ms")[0] == only(stored, "timeout")
    assert found(staff_client, "no such failure text")[0] == set()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0x123", "is not a search key"),
        ("0x" + "g" * 64, "is not a search key"),
        ("addr:" + TX, "is not a search key"),
        ("block:12a", "is not a search key"),
        ("9" * 30, "is not a search key"),
        ("stream:not-a-uuid", "is not a stream id"),
        ("id:1234", "is not a delivery id"),
        ("error:", "at least 3 characters"),
        ("ab", "at least 3 characters"),
        ("x" * 201, "too long"),
        ("line\u0001break", "control characters"),
    ],
)
def test_bad_search_input_gives_a_message(
    staff_client: Client, stored: dict[str, Delivery], text: str, message: str
) -> None:
    pks, body = found(staff_client, text)
    assert pks == set()
    assert message in body


@pytest.mark.parametrize(
    "query",
    [
        {"q": "a\x00b"},
        {"q": "<script>alert(1)</script>"},
        {"p": "abc"},
        {"p": "99999"},
        {"o": "7.-3"},
        {"date__gte": "yesterday"},
        {"error_group__id__exact": "x"},
        {"stream": "'; DROP TABLE x; --"},
        {"since": "forever"},
        {"confirmed__exact": "maybe"},
        {"_facets": "1"},
    ],
)
def test_odd_query_strings_never_fail(staff_client: Client, stored: dict[str, Delivery], query: dict[str, str]) -> None:
    response = staff_client.get(URL, query, follow=True)
    assert response.status_code == 200
    assert b"<script>alert(1)</script>" not in response.content


def test_a_hostile_search_is_shown_escaped(staff_client: Client, stored: dict[str, Delivery]) -> None:
    _, body = found(staff_client, "<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_filters_narrow_the_list(staff_client: Client, stored: dict[str, Delivery]) -> None:
    body = staff_client.get(URL, {"stream": OTHER_STREAM}).content.decode()
    assert str(stored["stream"].pk) in body and str(stored["tx"].pk) not in body
    body = staff_client.get(URL, {"status__exact": "retrying"}).content.decode()
    assert str(stored["error"].pk) in body and str(stored["tx"].pk) not in body
    group = stored["timeout"].error_group_id
    body = staff_client.get(URL, {"error_group__id__exact": group}).content.decode()
    assert str(stored["timeout"].pk) in body and str(stored["error"].pk) not in body


@pytest.mark.parametrize("text", ["\u202eevil", "tx:\u202e0x12", "stream:\u202eab"])
def test_a_direction_override_in_the_search_is_shown_not_obeyed(
    staff_client: Client, stored: dict[str, Delivery], text: str
) -> None:
    _, body = found(staff_client, text)
    messages = body[body.index('class="messagelist"'):]
    messages = messages[: messages.index("</ul>")]
    # The message quotes the text with the override named, so the rest of the sentence reads as written.
    assert "\u27e8U+202E\u27e9" in messages
    assert "\u202e" not in messages


def test_a_rows_link_keeps_the_lists_filters_as_djangos_would(staff_client: Client, stored: dict[str, Delivery]) -> None:
    query = {"q": TX, "since": "30d"}
    response = staff_client.get(URL, query)
    assert response.status_code == 200
    change = reverse("admin:deliveries_delivery_change", args=[stored["tx"].pk])
    # What Django's change list links to: the change URL with the list's query kept for the way back.
    expected = add_preserved_filters(
        {"preserved_filters": response.context["preserved_filters"], "opts": Delivery._meta}, change
    )
    assert "_changelist_filters=" in expected and "q%3D" in expected
    assert f'href="{expected.replace("&", "&amp;")}"' in response.content.decode()
    # Without filters the link is the plain change URL.
    assert f'href="{reverse("admin:deliveries_delivery_change", args=[stored["tx"].pk])}"' in staff_client.get(
        URL
    ).content.decode()
