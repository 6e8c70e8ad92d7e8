"""Simulator answers validated against the provider's published OpenAPI schemas and the contract."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.simulator import schemas

HISTORY = schemas.validator("streams.json", "historyTypes.HistoryResponse")
CREATORS = schemas.validator("aptos.json", "NFTTokensByCreatorsResponse")
APTOS_BAD_REQUEST = schemas.validator("aptos.json", "BadRequestResponse")
CREATOR = "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221"
BAYC = "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d"


def errors_of(validator: object, body: object) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]  # type: ignore[attr-defined]


def test_the_validator_rejects_a_wrong_history_body() -> None:
    # Guards the guard: a schema that resolved to nothing would accept anything.
    bad = {"result": [{"id": "not-a-uuid", "date": "x", "tinyPayload": {}, "errorMessage": 3}], "total": "1"}
    assert errors_of(HISTORY, bad)


@pytest.mark.parametrize("exclude_payload", [False, True])
def test_history_pages_match_the_published_schema(http: httpx.Client, exclude_payload: bool) -> None:
    cursor = None
    for _ in range(3):
        params = {"limit": 100, "excludePayload": str(exclude_payload).lower()}
        if cursor:
            params["cursor"] = cursor
        body = http.get("/history", params=params).json()
        assert errors_of(HISTORY, schemas.without_payload_extras(body)) == []
        for record in body["result"]:
            assert ("payload" in record) is (not exclude_payload)
            if not exclude_payload:
                assert (
                    set(record["payload"])
                    - set(schemas.without_payload_extras({"result": [record]})["result"][0]["payload"])
                    <= schemas.PAYLOAD_EXTRAS
                )
        cursor = body["cursor"]


def test_history_payloads_are_realistic_evm_data(http: httpx.Client) -> None:
    body = http.get("/history", params={"limit": 100}).json()
    hexes = re.compile(r"^0x[0-9a-f]{64}$")
    addresses = re.compile(r"^0x[0-9a-f]{40}$")
    for record in body["result"]:
        payload = record["payload"]
        assert hexes.match(payload["block"]["hash"])
        assert payload["block"]["number"] == record["tinyPayload"]["block"]
        assert payload["block"]["timestamp"].isdigit()
        assert payload["chainId"] == record["tinyPayload"]["chainId"]
        assert payload["retries"] == record["tinyPayload"]["retries"]
        assert payload["confirmed"] == record["tinyPayload"]["confirmed"]
        assert payload["streamId"] == record["streamId"] and payload["tag"] == record["tag"]
        for log in payload["logs"]:
            assert hexes.match(log["transactionHash"]) and addresses.match(log["address"])
            assert hexes.match(log["topic0"])
        for tx in payload["txs"]:
            assert hexes.match(tx["hash"]) and addresses.match(tx["fromAddress"])


def test_the_validator_rejects_a_wrong_creators_body() -> None:
    item = {"collection_data_id_hash": "ab" * 32, "supply": 1}
    assert errors_of(CREATORS, {"cursor": None, "hasNextPage": "no", "result": [item]})


def test_creators_pages_match_the_published_schema(sim: object, http: httpx.Client) -> None:
    for network in ("mainnet", "testnet"):
        body = http.get(
            f"/aptos/{network}/nfts/creators", params={"limit": 100, "creator_addresses": CREATOR}
        ).json()
        assert errors_of(CREATORS, body) == []
        assert body["result"], "a known creator has tokens"
        for item in body["result"]:
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", item["last_transaction_timestamp"])
            assert int(item["maximum"]) <= 2**64 - 1


def test_creators_bad_request_matches_the_published_schema(http: httpx.Client) -> None:
    response = http.get("/aptos/mainnet/nfts/creators", params={"limit": 5})
    assert response.status_code == 400
    body = response.json()
    # The published schema types statusCode as a string, the contract's example as a number; both occur.
    assert errors_of(APTOS_BAD_REQUEST, {**body, "statusCode": str(body["statusCode"])}) == []
    assert body == {
        "statusCode": 400,
        "message": ["creator_addresses must contain at least 1 elements"],
        "error": "Bad Request",
    }


OWNER_REQUIRED = {
    "token_address",
    "token_id",
    "contract_type",
    "owner_of",
    "block_number",
    "block_number_minted",
    "name",
    "symbol",
    "token_hash",
    "last_token_uri_sync",
    "last_metadata_sync",
    "possible_spam",
}


def test_owners_pages_have_the_contract_shape(http: httpx.Client) -> None:
    body = http.get(
        f"/api/v2/nft/{BAYC}/owners",
        params={"disable_total": "false", "normalizeMetadata": "true", "media_items": "true"},
    ).json()
    assert set(body) == {"status", "total", "page", "page_size", "cursor", "result"}
    assert body["status"] in ("SYNCING", "SYNCED")
    assert isinstance(body["total"], int) and body["page"] == 1 and body["page_size"] == 100
    assert isinstance(body["cursor"], str) and isinstance(body["result"], list) and len(body["result"]) == 100
    for owner in body["result"]:
        assert OWNER_REQUIRED <= set(owner)
        assert owner["contract_type"] in ("ERC721", "ERC1155")
        assert owner["token_id"].isdigit() and owner["block_number"].isdigit() and owner["amount"].isdigit()
        assert isinstance(owner["possible_spam"], bool) and isinstance(owner["verified_collection"], bool)
        assert owner["metadata"] is None or isinstance(owner["metadata"], str)
        normalized = owner["normalized_metadata"]
        assert set(normalized) >= {
            "name",
            "description",
            "image",
            "external_link",
            "animation_url",
            "attributes",
        }
        media = owner["media"]
        assert set(media) >= {"status", "category", "mimetype", "original_media_url", "media_collection"}
        if media["media_collection"] is not None:
            assert set(media["media_collection"]) == {"low", "medium", "high"}
            assert set(media["media_collection"]["low"]) == {"width", "height", "url"}


def check_owner_shape(owner: dict, *, hex_ids: bool, normalize: bool, with_media: bool) -> None:
    assert OWNER_REQUIRED <= set(owner)
    assert owner["contract_type"] in ("ERC721", "ERC1155")
    if hex_ids:
        assert re.fullmatch(r"0x[0-9a-f]+", owner["token_id"]), owner["token_id"]
    else:
        assert owner["token_id"].isdigit()
    assert owner["block_number"].isdigit() and owner["block_number_minted"].isdigit()
    assert owner["amount"].isdigit()
    assert isinstance(owner["possible_spam"], bool) and isinstance(owner["verified_collection"], bool)
    assert owner["metadata"] is None or isinstance(owner["metadata"], str)
    for stamp in ("last_token_uri_sync", "last_metadata_sync"):
        assert owner[stamp] is None or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", owner[stamp])
    if normalize:
        assert isinstance(owner["normalized_metadata"], dict)
        assert isinstance(owner["normalized_metadata"]["attributes"], list)
    else:
        assert owner["normalized_metadata"] is None
    assert ("media" in owner) is with_media
    if with_media:
        assert isinstance(owner["media"], dict)


@pytest.mark.parametrize("fmt", ["decimal", "hex"])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("with_media", [False, True])
def test_owners_pages_have_the_contract_shape_with_every_option(
    http: httpx.Client, fmt: str, normalize: bool, with_media: bool
) -> None:
    params = {
        "format": fmt,
        "normalizeMetadata": str(normalize).lower(),
        "media_items": str(with_media).lower(),
        "limit": 40,
    }
    first = http.get(f"/api/v2/nft/{BAYC}/owners", params=params).json()
    assert first["total"] is None, "disable_total defaults to true"
    second = http.get(f"/api/v2/nft/{BAYC}/owners", params={**params, "cursor": first["cursor"]}).json()
    assert second["page"] == 2 and second["page_size"] == 40
    for body in (first, second):
        assert set(body) == {"status", "total", "page", "page_size", "cursor", "result"}
        assert body["result"]
        for owner in body["result"]:
            check_owner_shape(owner, hex_ids=fmt == "hex", normalize=normalize, with_media=with_media)
