"""Tolerant parsing: odd values read, unknown fields kept, malformed items reported, never dropped."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import orjson
import pytest

from dashboard.upstream import errors
from dashboard.upstream.chains import (
    chain_name,
    normalize_chain,
    validate_aptos_address,
    validate_evm_address,
)
from dashboard.upstream.client import ClientSettings, UpstreamClient
from dashboard.upstream.creators import fetch_nfts_by_creators
from dashboard.upstream.history import fetch_history_page, iter_history_pages
from dashboard.upstream.owners import fetch_owners_page
from dashboard.upstream.parsing import as_bool, as_datetime, as_int

BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"
A = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"


def serving(*bodies: object) -> UpstreamClient:
    """A client whose upstream answers the given JSON bodies in turn (the last one repeats)."""
    queue = list(bodies)

    def answer(request: httpx.Request) -> httpx.Response:
        body = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx.Response(200, content=orjson.dumps(body))

    return UpstreamClient(
        "http://upstream.test", ClientSettings(api_key="k3y-value", max_retries=0),
        transport=httpx.MockTransport(answer),
    )  # fmt: skip


@pytest.mark.parametrize(
    "value, expected",
    [(12, 12), ("12", 12), (" 12 ", 12), ("0x0c", 12), (12.0, 12), ("12.0", 12), ("1e3", 1000),
     (None, None), ("", None), ("abc", None), (True, None), (1.5, None), ("18446744073709551615", 2**64 - 1)],
)  # fmt: skip
def test_as_int(value: object, expected: int | None) -> None:
    assert as_int(value) == expected


def test_as_bool_and_as_datetime() -> None:
    assert [as_bool(v) for v in (True, "true", "FALSE", 1, 0, "maybe", None)] == [
        True,
        True,
        False,
        True,
        False,
        None,
        None,
    ]
    expected = datetime(2022, 9, 17, 22, 3, 32, 123456, tzinfo=UTC)
    assert as_datetime("2022-09-17T22:03:32.123456Z") == expected
    assert as_datetime("2022-09-17T22:03:32.123456789Z") == expected
    assert as_datetime("2022-09-17T22:03:32.123Z") == expected.replace(microsecond=123000)
    assert as_datetime("1663452212") == datetime(2022, 9, 17, 22, 3, 32, tzinfo=UTC)
    assert as_datetime("yesterday") is None and as_datetime(None) is None


def test_chain_normalisation() -> None:
    assert normalize_chain("eth") == normalize_chain("0x1") == normalize_chain(1) == "0x1"
    assert (
        normalize_chain("BSC  Testnet") == normalize_chain("bsc_testnet") == normalize_chain("0x61") == "0x61"
    )
    assert normalize_chain("0x0089") == "0x89" and chain_name("0xa4b1") == "arbitrum"
    for bad in ("solana", "0x999", "", "9" * 30):
        with pytest.raises(errors.InvalidRequest):
            normalize_chain(bad)


def test_address_validation() -> None:
    assert validate_evm_address(BAYC.upper().replace("0X", "0x")) == BAYC
    assert validate_aptos_address("0x1") == "0x" + "0" * 63 + "1"
    for bad in ("", "0x", BAYC[:-1], BAYC + "0", "bc4ca0eda7647a8ab7c2061c2e118a18a936f13d00", None, 12):
        with pytest.raises(errors.InvalidRequest):
            validate_evm_address(bad)
    with pytest.raises(errors.InvalidRequest):
        validate_aptos_address("0x" + "a" * 65)


def test_owner_records_read_strings_nulls_and_keep_unknown_fields() -> None:
    body = {
        "status": "SYNCED", "total": "3", "page": "1", "page_size": "100", "cursor": "",
        "result": [
            {"token_address": BAYC.upper().replace("0X", "0x"), "token_id": 7, "amount": "2", "block_number": None,
             "possible_spam": "false", "metadata": '{"name": "Ape #7"}', "last_metadata_sync": None,
             "rarity_rank": 12},
            {"token_id": "8"},
            "garbage",
            {"token_address": BAYC, "token_id": "9", "metadata": "{not json", "normalized_metadata": "n/a"},
        ],
    }  # fmt: skip
    page = fetch_owners_page(serving(body), BAYC)
    assert page.total == 3 and page.page == 1 and page.page_size == 100 and page.cursor is None
    first = page.records[0]
    assert first.token_address == BAYC and first.token_id == "7" and first.amount == 2
    assert first.block_number is None and first.possible_spam is False
    assert first.metadata_json == {"name": "Ape #7"} and first.extra == {"rarity_rank": 12}
    assert page.records[1].metadata_json is None and page.records[1].normalized_metadata is None
    assert [(m.index, m.raw) for m in page.malformed] == [(1, {"token_id": "8"}), (2, "garbage")]
    assert "token_address" in page.malformed[0].reason


def test_a_lone_object_result_is_a_page_of_one_and_null_an_empty_page() -> None:
    single = fetch_owners_page(
        serving({"status": "SYNCING", "result": {"token_address": BAYC, "token_id": "1"}}), BAYC
    )
    assert len(single.records) == 1 and single.syncing
    empty = fetch_nfts_by_creators(serving({"cursor": None, "hasNextPage": False, "result": None}), A)
    assert empty.records == [] and empty.cursor is None


def test_a_body_without_a_result_is_a_bad_response() -> None:
    with pytest.raises(errors.BadResponse):
        fetch_history_page(serving({"total": 3, "result": "lots"}), limit=5)
    with pytest.raises(errors.BadResponse):
        fetch_history_page(serving([1, 2, 3]), limit=5)


def test_creator_records_tolerate_odd_shapes() -> None:
    item = {"token_data_id_hash": "ab" * 32, "maximum": "18446744073709551615", "supply": 3,
            "default_properties": '{"point": "0x30"}', "uri_mutable": "false", "creator_address": A.upper()[0:2].lower()
            + A[2:].upper(), "last_transaction_timestamp": "2022-09-17T22:03:32.000000Z", "new_field": [1]}  # fmt: skip
    page = fetch_nfts_by_creators(
        serving({"cursor": "c1", "hasNextPage": True, "result": [item, {"name": "x"}]}), A
    )
    record = page.records[0]
    assert record.maximum == 2**64 - 1 and record.supply == 3 and record.uri_mutable is False
    assert record.default_properties == {"point": "0x30"} and record.creator_address == A
    assert record.extra == {"new_field": [1]}
    assert len(page.malformed) == 1 and page.has_next_page and page.cursor == "c1"


def test_has_next_page_without_a_cursor_ends_the_walk() -> None:
    page = fetch_nfts_by_creators(serving({"cursor": None, "hasNextPage": True, "result": []}), A)
    assert page.cursor is None and not page.has_next_page


def test_history_malformed_records_are_reported_and_totals_as_strings_read() -> None:
    body = {"total": "2", "cursor": None, "result": [{"id": "a1", "date": None}, {"date": "x"}, None]}
    page = fetch_history_page(serving(body), limit=5)
    assert page.total == 2 and [r["id"] for r in page.records] == ["a1"] and len(page.malformed) == 2


def test_a_cursor_that_comes_back_stops_the_walk() -> None:
    looping = {"total": 1, "cursor": "same", "result": [{"id": "a"}]}
    client = serving({"total": 1, "cursor": "same", "result": [{"id": "a"}]}, looping)
    pages = iter_history_pages(client, limit=5)
    next(pages)
    next(pages)
    with pytest.raises(errors.BadResponse, match="same cursor"):
        next(pages)
