"""`GET /api/v2/nft/{address}/owners` of the EVM host: the owners of one NFT contract's tokens."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from dashboard.upstream import errors
from dashboard.upstream.chains import normalize_chain, validate_evm_address
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.pagination import follow_cursor
from dashboard.upstream.parsing import as_int, as_str
from dashboard.upstream.records import MalformedRecord, OwnerRecord, parse_items, result_items

TokenIdFormat = Literal["decimal", "hex"]


@dataclass
class OwnersPage:
    # "SYNCING" while the provider is still indexing a contract it had not seen; "SYNCED" after.
    status: str | None
    total: int | None
    page: int | None
    page_size: int | None
    cursor: str | None
    records: list[OwnerRecord]
    malformed: list[MalformedRecord] = field(default_factory=list)

    @property
    def syncing(self) -> bool:
        return (self.status or "").upper() == "SYNCING"


def fetch_owners_page(
    client: UpstreamClient,
    address: str,
    *,
    chain: str | int = "eth",
    format: TokenIdFormat = "decimal",  # noqa: A002 - the provider's parameter name
    limit: int = 100,
    cursor: str | None = None,
    disable_total: bool = True,
    normalize_metadata: bool = False,
    media_items: bool = False,
) -> OwnersPage:
    """One page of owners. The address and chain are checked before anything is sent."""
    address = validate_evm_address(address, what="contract address")
    chain_id = normalize_chain(chain)
    if format not in ("decimal", "hex"):
        raise errors.InvalidRequest(f"format must be 'decimal' or 'hex', got {str(format)[:20]!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise errors.InvalidRequest(f"limit must be between 1 and 100, got {limit!r}")
    path = f"/api/v2/nft/{address}/owners"
    data = client.get_json(
        path,
        {
            "chain": chain_id,
            "format": format,
            "limit": limit,
            "cursor": cursor or None,
            # Sent explicitly: the provider's defaults have changed before and may again.
            "disable_total": disable_total,
            "normalizeMetadata": normalize_metadata,
            "media_items": media_items,
        },
        expect_object=True,
    )
    items = result_items(data.get("result"))
    if items is None:
        raise errors.BadResponse(
            f"{client.base_url}{path} answered without a result list", url=client.base_url
        )
    records, malformed = parse_items(items, OwnerRecord.parse)
    next_cursor = as_str(data.get("cursor"))
    return OwnersPage(
        status=as_str(data.get("status")),
        total=as_int(data.get("total")),
        page=as_int(data.get("page")),
        page_size=as_int(data.get("page_size")),
        cursor=next_cursor or None,
        records=records,
        malformed=malformed,
    )


def iter_owners_pages(
    client: UpstreamClient,
    address: str,
    *,
    chain: str | int = "eth",
    format: TokenIdFormat = "decimal",  # noqa: A002
    limit: int = 100,
    cursor: str | None = None,
    disable_total: bool = True,
    normalize_metadata: bool = False,
    media_items: bool = False,
    max_pages: int | None = None,
) -> Iterator[OwnersPage]:
    """Pages from `cursor` (or the first) to the last, or `max_pages` of them."""
    # Validate once up front, so a bad address fails before the generator is even advanced twice.
    address = validate_evm_address(address, what="contract address")
    chain_id = normalize_chain(chain)

    def fetch(page_cursor: str | None) -> OwnersPage:
        return fetch_owners_page(
            client, address, chain=chain_id, format=format, limit=limit, cursor=page_cursor,
            disable_total=disable_total, normalize_metadata=normalize_metadata, media_items=media_items,
        )  # fmt: skip

    return follow_cursor(fetch, cursor=cursor, max_pages=max_pages)


def iter_owners(client: UpstreamClient, address: str, **kwargs: object) -> Iterator[OwnerRecord]:
    """Every owner record, page after page (malformed items are skipped here; use the pages to see them)."""
    for page in iter_owners_pages(client, address, **kwargs):  # type: ignore[arg-type]
        yield from page.records
