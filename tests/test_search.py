from __future__ import annotations

import pytest

from dashboard.deliveries.search import SearchError, parse_search

TX = "0x" + "ab" * 32
ADDR = "0x" + "Cd" * 20


def test_a_hash_matches_transactions_and_topics() -> None:
    term = parse_search(f"  {TX.upper().replace('0X', '0x')} ")
    assert term.keys == (f"tx:{TX}", f"topic:{TX}")


def test_a_prefix_narrows_the_kind() -> None:
    assert parse_search(f"topic:{TX}").keys == (f"topic:{TX}",)
    assert parse_search(f"tx: {TX}").keys == (f"tx:{TX}",)


def test_an_address_is_lower_cased() -> None:
    assert parse_search(ADDR).keys == (f"addr:{ADDR.lower()}",)


def test_a_block_number() -> None:
    assert parse_search("0018400123").keys == ("block:18400123",)


def test_an_event_name_is_a_lower_cased_key() -> None:
    term = parse_search("event: Transfer")
    assert (term.kind, term.value, term.keys) == ("event", "Transfer", ("event:transfer",))
    assert term.label == "event Transfer"
    assert parse_search("EVENT:$Swap_2").keys == ("event:$swap_2",)


@pytest.mark.parametrize("text", ["event:", "event:<script>", "event:Transfer(address)", "event:" + "x" * 65, "event:9lives"])
def test_an_event_is_a_solidity_name(text: str) -> None:
    with pytest.raises(SearchError) as info:
        parse_search(text)
    assert "is not an event name" in str(info.value)


@pytest.mark.parametrize("text", ["", "   ", "0x123", "hello world", "<script>alert(1)</script>", "9" * 30, "addr:" + TX])
def test_anything_else_is_refused_with_a_message(text: str) -> None:
    with pytest.raises(SearchError) as info:
        parse_search(text)
    assert "block number" in str(info.value)
