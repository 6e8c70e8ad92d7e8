"""`GET /nfts/creators` of the Aptos hosts (mainnet and testnet): NFTs made by given creators."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from dashboard.upstream import errors
from dashboard.upstream.chains import validate_aptos_address
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.pagination import follow_cursor
from dashboard.upstream.parsing import as_bool, as_str
from dashboard.upstream.records import CreatorNft, MalformedRecord, parse_items, result_items

MAX_CREATORS = 25


@dataclass
class CreatorsPage:
    cursor: str | None
    has_next_page: bool
    records: list[CreatorNft]
    malformed: list[MalformedRecord] = field(default_factory=list)


def clean_creator_addresses(creator_addresses: Iterable[str] | str) -> list[str]:
    """1..25 distinct, valid, lower-cased addresses, in the order given; InvalidRequest otherwise."""
    if isinstance(creator_addresses, str):
        creator_addresses = [creator_addresses]
    cleaned = list(dict.fromkeys(validate_aptos_address(a) for a in creator_addresses))
    if not cleaned:
        raise errors.InvalidRequest("at least one creator address is required")
    if len(cleaned) > MAX_CREATORS:
        raise errors.InvalidRequest(
            f"at most {MAX_CREATORS} creator addresses per request, got {len(cleaned)}"
        )
    return cleaned


def fetch_nfts_by_creators(
    client: UpstreamClient,
    creator_addresses: Iterable[str] | str,
    *,
    limit: int = 100,
    offset: int = 0,
    cursor: str | None = None,
) -> CreatorsPage:
    """One page. `client` is the mainnet or the testnet client; addresses are checked before sending."""
    addresses = clean_creator_addresses(creator_addresses)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise errors.InvalidRequest(f"limit must be between 1 and 100, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= 100:
        raise errors.InvalidRequest(f"offset must be between 0 and 100, got {offset!r}")
    data = client.get_json(
        "/nfts/creators",
        {
            "limit": limit,
            # The cursor encodes the position; an offset beside it could be applied twice.
            "offset": offset if offset and not cursor else None,
            "cursor": cursor or None,
            # A sequence goes out as the canonical repeated key: creator_addresses=A&creator_addresses=B.
            "creator_addresses": addresses,
        },
        expect_object=True,
    )
    items = result_items(data.get("result"))
    if items is None:
        raise errors.BadResponse(f"{client.base_url}/nfts/creators answered without a result list")
    records, malformed = parse_items(items, CreatorNft.parse)
    next_cursor = as_str(data.get("cursor")) or None
    has_next = as_bool(data.get("hasNextPage"))
    if has_next is None:
        has_next = next_cursor is not None
    return CreatorsPage(
        # Without a cursor there is no way to the next page, whatever hasNextPage claims.
        cursor=next_cursor if has_next else None,
        has_next_page=has_next and next_cursor is not None,
        records=records,
        malformed=malformed,
    )


def iter_nfts_by_creators_pages(
    client: UpstreamClient,
    creator_addresses: Iterable[str] | str,
    *,
    limit: int = 100,
    offset: int = 0,
    cursor: str | None = None,
    max_pages: int | None = None,
) -> Iterator[CreatorsPage]:
    addresses = clean_creator_addresses(creator_addresses)

    def fetch(page_cursor: str | None) -> CreatorsPage:
        return fetch_nfts_by_creators(client, addresses, limit=limit, offset=offset, cursor=page_cursor)

    return follow_cursor(fetch, cursor=cursor, max_pages=max_pages)


def iter_nfts_by_creators(
    client: UpstreamClient, creator_addresses: Iterable[str] | str, **kwargs: object
) -> Iterator[CreatorNft]:
    for page in iter_nfts_by_creators_pages(client, creator_addresses, **kwargs):  # type: ignore[arg-type]
        yield from page.records
