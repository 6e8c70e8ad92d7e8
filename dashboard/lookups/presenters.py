"""What the lookup tables show, computed from the upstream's records.

Everything here treats the upstream's data as untrusted: metadata is third-party JSON that may be
broken or hostile, and URLs in it are shown as links or images only when they are plain http(s).
Escaping is left to the templates' autoescape; nothing here marks text safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

# Public gateways turn ipfs:// and ar:// into URLs a browser can load.
IPFS_GATEWAY = "https://ipfs.io/ipfs/"
ARWEAVE_GATEWAY = "https://arweave.net/"
U64_MAX = 2**64 - 1
MAX_METADATA_CHARS = 20_000


def web_url(value: Any) -> str | None:
    """`value` as an http(s) URL a page may link or load, or None (javascript:, data:, garbage)."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > 2048 or any(ord(c) < 0x20 for c in url):
        return None
    lowered = url.lower()
    if lowered.startswith("ipfs://"):
        path = url[7:]
        if path.lower().startswith("ipfs/"):
            path = path[5:]
        url = IPFS_GATEWAY + path.lstrip("/")
    elif lowered.startswith("ar://"):
        url = ARWEAVE_GATEWAY + url[5:].lstrip("/")
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


@dataclass
class OwnerRow:
    record: Any
    thumbnail: str | None
    media_status: str | None
    token_name: str | None
    metadata_text: str | None
    metadata_broken: bool
    attributes: list[tuple[str, str]] = field(default_factory=list)
    image_link: str | None = None
    external_link: str | None = None

    @property
    def has_details(self) -> bool:
        return bool(self.metadata_text or self.attributes or self.record.token_uri)

    @property
    def token_uri_link(self) -> str | None:
        return web_url(self.record.token_uri)


def owner_row(record: Any, *, with_media: bool) -> OwnerRow:
    normalized = record.normalized_metadata if isinstance(record.normalized_metadata, dict) else None
    parsed = record.metadata_json if isinstance(record.metadata_json, dict) else None
    thumbnail = None
    media_status = None
    if with_media:
        media = record.media if isinstance(record.media, dict) else {}
        media_status = media.get("status") if isinstance(media.get("status"), str) else None
        for size in ("low", "medium", "high"):
            thumbnail = web_url(_dig(media, "media_collection", size, "url"))
            if thumbnail:
                break
        if thumbnail is None:
            thumbnail = web_url(media.get("original_media_url"))
        if thumbnail is None:
            thumbnail = web_url(_dig(normalized, "image")) or web_url(_dig(parsed, "image"))
    token_name = _text(_dig(normalized, "name")) or _text(_dig(parsed, "name"))
    metadata_text, broken = _metadata_text(record.metadata, parsed)
    attributes = _attributes(_dig(normalized, "attributes") or _dig(parsed, "attributes"))
    return OwnerRow(
        record=record,
        thumbnail=thumbnail,
        media_status=media_status,
        token_name=token_name,
        metadata_text=metadata_text,
        metadata_broken=broken,
        attributes=attributes,
        image_link=web_url(_dig(normalized, "image")) or web_url(_dig(parsed, "image")),
        external_link=web_url(_dig(normalized, "external_link")) or web_url(_dig(parsed, "external_url")),
    )


def _text(value: Any, limit: int = 200) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _metadata_text(raw: str | None, parsed: dict[str, Any] | None) -> tuple[str | None, bool]:
    """Pretty JSON when the metadata parses; the raw text (cut short) and a flag when it does not."""
    if parsed is not None:
        text = json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=False)
        return text[:MAX_METADATA_CHARS], False
    if not raw:
        return None, False
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return raw[:MAX_METADATA_CHARS], True
    return json.dumps(value, indent=2, ensure_ascii=False)[:MAX_METADATA_CHARS], False


def _attributes(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    out: list[tuple[str, str]] = []
    for item in value[:50]:
        if not isinstance(item, dict):
            continue
        trait = _text(item.get("trait_type"), 60) or "—"
        shown = _text(item.get("value"), 120)
        if shown is not None:
            out.append((trait, shown))
    return out


def royalty_percent(numerator: int | None, denominator: int | None) -> str | None:
    """25 / 1000 → "2.5 %"; None when the denominator is missing or zero."""
    if numerator is None or not denominator:
        return None
    percent = (Decimal(numerator) * 100 / Decimal(denominator)).quantize(Decimal("0.01")).normalize()
    return f"{percent:f} %"


def supply_text(supply: int | None, maximum: int | None) -> str:
    shown_supply = "?" if supply is None else f"{supply:,}"
    if maximum is None:
        return f"{shown_supply} / ?"
    if maximum >= U64_MAX:
        return f"{shown_supply} / unlimited"
    return f"{shown_supply} / {maximum:,}"


MUTABILITY_FLAGS = (
    ("description_mutable", "description"),
    ("maximum_mutable", "maximum"),
    ("properties_mutable", "properties"),
    ("royalty_mutable", "royalty"),
    ("uri_mutable", "URI"),
)


@dataclass
class CreatorRow:
    record: Any
    royalty: str | None
    supply: str
    mutable: list[str]
    frozen: list[str]
    metadata_link: str | None
    last_transaction: datetime | None


@dataclass
class CollectionGroup:
    key: str
    name: str
    creator: str | None
    rows: list[CreatorRow] = field(default_factory=list)


def creator_row(record: Any) -> CreatorRow:
    mutable = [label for attr, label in MUTABILITY_FLAGS if getattr(record, attr, None) is True]
    frozen = [label for attr, label in MUTABILITY_FLAGS if getattr(record, attr, None) is False]
    return CreatorRow(
        record=record,
        royalty=royalty_percent(record.royalty_points_numerator, record.royalty_points_denominator),
        supply=supply_text(record.supply, record.maximum),
        mutable=mutable,
        frozen=frozen,
        metadata_link=web_url(record.metadata_uri),
        last_transaction=record.last_transaction_timestamp,
    )


def group_by_collection(records: list[Any]) -> list[CollectionGroup]:
    """Groups in the order their first token appears; the upstream sorts by latest change."""
    groups: dict[str, CollectionGroup] = {}
    for record in records:
        key = record.collection_data_id_hash or f"{record.creator_address}:{record.collection_name}"
        group = groups.get(key)
        if group is None:
            group = groups[key] = CollectionGroup(
                key=key, name=record.collection_name or "(unnamed collection)", creator=record.creator_address
            )
        group.rows.append(creator_row(record))
    return list(groups.values())
