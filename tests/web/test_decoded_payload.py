"""The delivery page decodes logs and inputs with the payload's ABI: named, typed arguments, token
amounts with the payload's decimals, and rows the ABI does not match shown raw with the reason."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.sources.models import Source
from tests.deliveries.test_decoding import (
    ALICE,
    BOB,
    CAROL,
    ERC20_TRANSFER,
    ORDER_FN,
    SWAP_V2,
    TRANSFER,
    TRANSFER_BATCH,
    TRANSFER_BATCH_ABI,
    TRANSFER_FN,
    USDC,
    inp,
    topic,
    w,
)
from tests.web.conftest import TX, record, store

pytestmark = pytest.mark.django_db


def payload(**extra: Any) -> dict[str, Any]:
    return {
        "block": {"number": "100", "hash": "0x" + "12" * 32, "timestamp": "1700000000"},
        "chainId": "0x1",
        "abi": [ERC20_TRANSFER, TRANSFER_BATCH_ABI, TRANSFER_FN, ORDER_FN],
        "logs": [
            {"logIndex": "4", "transactionHash": TX, "address": USDC, "topic0": TRANSFER, "topic1": topic(ALICE),
             "topic2": topic(BOB), "topic3": None, "data": "0x" + w(1_250_500_000)},
            {"logIndex": "5", "transactionHash": TX, "address": CAROL, "topic0": TRANSFER_BATCH,
             "topic1": topic(CAROL), "topic2": topic(ALICE), "topic3": topic(BOB),
             "data": "0x" + w(0x40) + w(0x80) + w(1) + w(77) + w(1) + w(3)},
            {"logIndex": "6", "transactionHash": TX, "address": CAROL, "topic0": SWAP_V2, "data": "0x"},
        ],
        "txs": [
            {"hash": TX, "fromAddress": ALICE, "toAddress": USDC, "input": "0xa9059cbb" + w(BOB) + w(1_250_500_000),
             "transactionIndex": "0"},
            {"hash": "0x" + "cd" * 32, "fromAddress": ALICE, "toAddress": USDC, "input": "0x12345678",
             "transactionIndex": "1"},
        ],
        "erc20Transfers": [{"transactionHash": TX, "logIndex": "4", "contract": USDC, "from": ALICE, "to": BOB,
                            "value": "1250500000", "tokenSymbol": "USDC", "tokenDecimals": "6"}],
        **extra,
    }


def test_it_shows_decoded_events_and_calls(plain_source: Source, logged_in_client: Client,
                                          django_assert_num_queries: Any) -> None:
    (d,) = store(plain_source, record(payload=payload()))
    # the same queries as any delivery page: decoding reads nothing from the database
    # + the open incidents for the navigation's count (alerts.context_processors: one query
    # on the partial index of open incidents; the Overview's list and the Streams page's marks share it)
    with django_assert_num_queries(10):
        response = logged_in_client.get(f"/deliveries/{d.pk}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Decoded events" in body and "Decoded calls" in body
    assert '<strong class="ev-name" title="Transfer(address,address,uint256)">Transfer</strong>' in body
    assert '<span class="an">from</span> <span class="at" title="address">address indexed</span>=' in body
    assert f"/search/?q={ALICE}" in body and f"https://etherscan.io/address/{BOB}" in body
    assert '<span class="amount" title="1250500000 (6 decimals)">1,250.5 USDC</span>' in body
    assert '<span class="an">ids</span> <span class="at" title="uint256[]">uint256[]</span>=[<span class="num">77</span>]' in body
    assert ">transfer</strong>" in body
    assert "— no event in the ABI has this topic0" in body
    assert "— no function in the ABI has the selector 0x12345678" in body
    assert "1 raw" in body
    sections = {s.key: s for s in response.context["decoded"]}
    assert [r.html is None for r in sections["decoded-logs"].rows] == [False, False, True]
    # the ABI table gives each entry's topic0 or selector
    assert "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef" in body
    assert 'title="0xa9059cbb"' in body


def test_hostile_abi_and_values_are_escaped_and_shown_raw(plain_source: Source, logged_in_client: Client) -> None:
    evil = "<img src=x onerror=alert(1)>"
    abi = [
        {"type": "event", "name": evil, "inputs": []},
        {"type": "event", "name": "Note", "inputs": [inp(evil, "string"), inp("who", "address", True)]},
        {"type": "event", "name": "Bad", "inputs": [inp("x", evil)]},
        "</td><script>alert(2)</script>",
        {"type": "event", "name": "Transfer", "anonymous": True, "inputs": ERC20_TRANSFER["inputs"]},
    ]
    from dashboard.deliveries.decoding import read_abi

    note_topic = "0x" + read_abi(abi).items[1].selector.hex()
    text = "<script>alert(3)</script>\u202e"
    encoded = text.encode()
    data = "0x" + w(0x20) + w(len(encoded)) + encoded.hex().ljust(64 * ((len(encoded) + 31) // 32), "0")
    logs = [
        {"logIndex": "1", "transactionHash": TX, "address": CAROL, "topic0": note_topic, "topic1": topic(BOB),
         "data": data},
        {"logIndex": "2", "transactionHash": TX, "address": CAROL, "topic0": None, "data": "0x" + w(1)},
        {"logIndex": "3", "transactionHash": evil, "address": evil, "topic0": evil, "data": evil},
    ]
    (d,) = store(plain_source, record(payload={"chainId": "0x1", "abi": abi, "logs": logs,
                                              "txs": [{"hash": TX, "input": evil}]}))
    response = logged_in_client.get(f"/deliveries/{d.pk}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<img src=x" not in body and "<script>alert" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert '"&lt;script&gt;alert(3)&lt;/script&gt;⟨U+202E⟩"' in body  # the decoded string, escaped and visible
    assert "not used: the event has no valid name" in body
    assert "not used: the type “&lt;img src=x onerror=alert(1)&gt;” is not an ABI type" in body
    assert "not used: the entry is not an object" in body
    assert "the log has no topic0 (an anonymous event); the ABI&#x27;s anonymous events carry no topic" in body
    assert "— a topic is not 32 bytes of hex" in body


def test_a_payload_without_an_abi_has_no_decoded_sections(plain_source: Source, logged_in_client: Client) -> None:
    (d,) = store(plain_source, record(payload=payload(abi=None)))
    response = logged_in_client.get(f"/deliveries/{d.pk}/")
    assert response.status_code == 200
    assert response.context["decoded"] == []
    assert "Decoded events" not in response.content.decode()


def test_search_finds_a_decoded_party(plain_source: Source, logged_in_client: Client) -> None:
    # BOB is only inside topic2 and the call's argument: no payload field names him
    (d,) = store(plain_source, record(payload=payload(erc20Transfers=[])))
    response = logged_in_client.get("/search/", {"q": BOB})
    assert response.status_code == 200
    assert str(d.pk) in response.content.decode()


def test_the_list_the_search_box_and_the_admin_find_deliveries_by_event(
    plain_source: Source, logged_in_client: Client, client: Client
) -> None:
    from tests.conftest import make_user

    batch_only = payload(logs=payload()["logs"][1:], txs=[])
    now = timezone.now()
    # newest first, as the pages list them
    batch, transfer, none = store(
        plain_source,
        record(payload=payload(), date=now - timedelta(minutes=2)),
        record(payload=batch_only, date=now - timedelta(minutes=1)),
        record(payload=payload(abi=None), date=now - timedelta(minutes=3)),  # the same logs, no ABI to decode them
    )
    listed = logged_in_client.get("/deliveries/", {"q": "event:Transfer"})
    assert listed.status_code == 200
    assert [d.pk for d in listed.context["deliveries"]] == [transfer.pk]
    assert [d.pk for d in logged_in_client.get("/deliveries/", {"q": "event:transferbatch"}).context["deliveries"]] == [
        batch.pk, transfer.pk]
    box = logged_in_client.get("/search/", {"q": "event:TransferBatch"})
    assert {d.pk for d in box.context["deliveries"]} == {batch.pk, transfer.pk}
    assert "Deliveries whose payload holds the event TransferBatch" in box.content.decode()
    bad = logged_in_client.get("/deliveries/", {"q": "event:<b>x</b>"})
    assert bad.status_code == 400 and "is not an event name" in bad.content.decode()
    assert "<b>x</b>" not in bad.content.decode()
    client.force_login(make_user("root", staff=True))
    admin = client.get("/admin/deliveries/delivery/", {"q": "event:Transfer"})
    assert [d.pk for d in admin.context["cl"].result_list] == [transfer.pk]
    assert none.pk not in {d.pk for d in box.context["deliveries"]}
