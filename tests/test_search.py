from __future__ import annotations

import pytest

from dashboard.deliveries.models import Delivery
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


@pytest.mark.django_db
def test_a_keys_share_follows_the_statistics_as_they_change() -> None:
    """The most common keys of each partition are read once and kept while the partitions' statistics stay the
    same; an ANALYZE that changes them is seen by the next search."""
    import uuid
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from dashboard.deliveries.ingest import store_records
    from dashboard.deliveries.search import key_matches, key_share
    from tests.factories import history_record, make_source

    source = make_source("stats")
    start = datetime(2026, 3, 2, 10, tzinfo=UTC)

    def batch(first: int, count: int, *, busy: bool) -> list[dict[str, object]]:
        return [history_record(date=start + timedelta(minutes=n), record_id=uuid.UUID(int=n), block=n, payload={
            "block": {"number": str(n)}, "logs": [], "txs": [
                {"hash": "0x" + f"{n:064x}", "fromAddress": ADDR if busy else "0x" + f"{n:040x}"}]})
            for n in range(first, first + count)]

    key = f"addr:{ADDR.lower()}"
    store_records(source, batch(1, 200, busy=True))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
        assert key_share(cursor, "default", "deliveries_delivery", [key]) == pytest.approx(1.0)
        assert key_share(cursor, "default", "deliveries_delivery", ["addr:0x" + "00" * 20]) == 0.0
    store_records(source, batch(1001, 200, busy=False))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
        assert key_share(cursor, "default", "deliveries_delivery", [key]) == pytest.approx(0.5, abs=0.05)
    # Frequent or not, the search finds exactly the rows holding the key.
    found = key_matches(Delivery.objects.all(), [key])
    assert found.count() == 200 and all(key in keys for keys in found.values_list("search_keys", flat=True))
