"""`GET /history` of the streams host: one page of delivery records and a cursor.

Records stay plain dicts: ingestion stores them as received (unknown keys included) and derives
its columns itself. A record without an id cannot be stored and is reported as malformed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.pagination import follow_cursor
from dashboard.upstream.parsing import as_int, as_str
from dashboard.upstream.records import result_items


@dataclass
class HistoryPage:
    records: list[dict[str, Any]]
    total: int | None
    cursor: str | None
    # Records that were not objects with an id; reported, never silently dropped.
    malformed: list[Any] = field(default_factory=list)


def fetch_history_page(
    client: UpstreamClient, *, limit: int = 100, cursor: str | None = None, exclude_payload: bool = False
) -> HistoryPage:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise errors.InvalidRequest(f"limit must be between 1 and 100, got {limit!r}")
    data = client.get_json(
        "/history",
        {"limit": limit, "cursor": cursor or None, "excludePayload": exclude_payload or None},
        expect_object=True,
    )
    # A 200 without the key (an error text, `{}` from a proxy) is no page: read as an empty one, it would end a
    # walk early and mark unread history as synced. `"result": null` is an empty page.
    items = result_items(data.get("result")) if "result" in data else None
    if items is None:
        raise errors.BadResponse(f"{client.base_url}/history answered without a result list")
    records: list[dict[str, Any]] = []
    malformed: list[Any] = []
    for item in items:
        record_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(record_id, str) and record_id.strip():
            records.append(item)
        else:
            malformed.append(item)
    next_cursor = as_str(data.get("cursor"))
    return HistoryPage(
        records=records,
        total=as_int(data.get("total")),
        cursor=next_cursor if next_cursor and next_cursor != "null" else None,
        malformed=malformed,
    )


def iter_history_pages(
    client: UpstreamClient,
    *,
    limit: int = 100,
    cursor: str | None = None,
    exclude_payload: bool = False,
    max_pages: int | None = None,
) -> Iterator[HistoryPage]:
    """Pages from `cursor` (or the newest) to the last one, or `max_pages` of them."""

    def fetch(page_cursor: str | None) -> HistoryPage:
        return fetch_history_page(client, limit=limit, cursor=page_cursor, exclude_payload=exclude_payload)

    return follow_cursor(fetch, cursor=cursor, max_pages=max_pages)
