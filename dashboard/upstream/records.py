"""Typed records for the owners and creators operations, read tolerantly from whatever arrives.

A record keeps every field it was sent (`raw`), exposes the known ones typed, and is only
refused ("malformed") when it lacks what identifies it; refused ones are reported by the page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypeVar

import orjson

from dashboard.upstream.parsing import as_bool, as_datetime, as_dict, as_int, as_str

T = TypeVar("T")


@dataclass(frozen=True)
class MalformedRecord:
    """A result item that could not be read; kept with its position so the caller can report it."""

    index: int
    reason: str
    raw: Any


class RecordError(ValueError):
    """Raised by a record parser for an item that lacks what identifies it."""


@dataclass(frozen=True)
class OwnerRecord:
    token_address: str
    token_id: str
    owner_of: str | None
    contract_type: str | None
    amount: int | None
    block_number: int | None
    block_number_minted: int | None
    name: str | None
    symbol: str | None
    token_uri: str | None
    # The provider sends metadata as a JSON document inside a string; `metadata_json` is it decoded.
    metadata: str | None
    metadata_json: dict[str, Any] | None
    normalized_metadata: dict[str, Any] | None
    media: dict[str, Any] | None
    token_hash: str | None
    last_token_uri_sync: datetime | None
    last_metadata_sync: datetime | None
    possible_spam: bool | None
    verified_collection: bool | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def token_id_int(self) -> int | None:
        """The token id as a number whether it came as decimal or as 0x-hex (format=hex)."""
        return as_int(self.token_id)

    @property
    def extra(self) -> dict[str, Any]:
        """Fields this version of the client does not know, untouched."""
        return {k: v for k, v in self.raw.items() if k not in OWNER_FIELDS}

    @classmethod
    def parse(cls, item: Any) -> OwnerRecord:
        if not isinstance(item, dict):
            raise RecordError(f"expected an object, got {type(item).__name__}")
        token_address = as_str(item.get("token_address"))
        token_id = as_str(item.get("token_id"))
        if not token_address or token_id is None or token_id == "":
            raise RecordError("missing token_address or token_id")
        metadata = item.get("metadata")
        if isinstance(metadata, dict):
            # Tolerate a provider that already decoded it.
            metadata_json: dict[str, Any] | None = metadata
            metadata_text: str | None = orjson.dumps(metadata).decode()
        else:
            metadata_text = as_str(metadata)
            metadata_json = _json_object(metadata_text)
        return cls(
            token_address=token_address.lower(),
            token_id=token_id,
            owner_of=_lower(as_str(item.get("owner_of"))),
            contract_type=as_str(item.get("contract_type")),
            amount=as_int(item.get("amount")),
            block_number=as_int(item.get("block_number")),
            block_number_minted=as_int(item.get("block_number_minted")),
            name=as_str(item.get("name")),
            symbol=as_str(item.get("symbol")),
            token_uri=as_str(item.get("token_uri")),
            metadata=metadata_text,
            metadata_json=metadata_json,
            normalized_metadata=as_dict(item.get("normalized_metadata")),
            media=as_dict(item.get("media")),
            token_hash=as_str(item.get("token_hash")),
            last_token_uri_sync=as_datetime(item.get("last_token_uri_sync")),
            last_metadata_sync=as_datetime(item.get("last_metadata_sync")),
            possible_spam=as_bool(item.get("possible_spam")),
            verified_collection=as_bool(item.get("verified_collection")),
            raw=item,
        )


OWNER_FIELDS = frozenset(f.name for f in fields(OwnerRecord)) - {"raw", "metadata_json"}


@dataclass(frozen=True)
class CreatorNft:
    token_data_id_hash: str
    collection_data_id_hash: str | None
    collection_name: str | None
    creator_address: str | None
    name: str | None
    description: str | None
    metadata_uri: str | None
    default_properties: dict[str, Any] | None
    description_mutable: bool | None
    largest_property_version: int | None
    last_transaction_timestamp: datetime | None
    last_transaction_version: int | None
    # u64 values beyond float precision; kept as exact ints.
    maximum: int | None
    maximum_mutable: bool | None
    payee_address: str | None
    properties_mutable: bool | None
    royalty_mutable: bool | None
    royalty_points_denominator: int | None
    royalty_points_numerator: int | None
    supply: int | None
    uri_mutable: bool | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.raw.items() if k not in CREATOR_FIELDS}

    @classmethod
    def parse(cls, item: Any) -> CreatorNft:
        if not isinstance(item, dict):
            raise RecordError(f"expected an object, got {type(item).__name__}")
        token_hash = as_str(item.get("token_data_id_hash"))
        if not token_hash:
            raise RecordError("missing token_data_id_hash")
        properties = item.get("default_properties")
        if isinstance(properties, str):
            # The original description shows it as a JSON document inside a string.
            properties = _json_object(properties)
        return cls(
            token_data_id_hash=token_hash,
            collection_data_id_hash=as_str(item.get("collection_data_id_hash")),
            collection_name=as_str(item.get("collection_name")),
            creator_address=_lower(as_str(item.get("creator_address"))),
            name=as_str(item.get("name")),
            description=as_str(item.get("description")),
            metadata_uri=as_str(item.get("metadata_uri")),
            default_properties=as_dict(properties),
            description_mutable=as_bool(item.get("description_mutable")),
            largest_property_version=as_int(item.get("largest_property_version")),
            last_transaction_timestamp=as_datetime(item.get("last_transaction_timestamp")),
            last_transaction_version=as_int(item.get("last_transaction_version")),
            maximum=as_int(item.get("maximum")),
            maximum_mutable=as_bool(item.get("maximum_mutable")),
            payee_address=_lower(as_str(item.get("payee_address"))),
            properties_mutable=as_bool(item.get("properties_mutable")),
            royalty_mutable=as_bool(item.get("royalty_mutable")),
            royalty_points_denominator=as_int(item.get("royalty_points_denominator")),
            royalty_points_numerator=as_int(item.get("royalty_points_numerator")),
            supply=as_int(item.get("supply")),
            uri_mutable=as_bool(item.get("uri_mutable")),
            raw=item,
        )


CREATOR_FIELDS = frozenset(f.name for f in fields(CreatorNft)) - {"raw"}


def result_items(value: Any) -> list[Any] | None:
    """The `result` of a page as a list: null is an empty page, and a lone object (as the original
    description's example shows) a page of one. None when it is something else entirely."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return [value]
    return None


def parse_items(items: list[Any], parse: Callable[[Any], T]) -> tuple[list[T], list[MalformedRecord]]:
    records: list[T] = []
    malformed: list[MalformedRecord] = []
    for index, item in enumerate(items):
        try:
            records.append(parse(item))
        except RecordError as exc:
            malformed.append(MalformedRecord(index, str(exc), item))
    return records, malformed


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _lower(value: str | None) -> str | None:
    return value.lower() if value is not None else None
