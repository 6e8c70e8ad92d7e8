"""Following cursors safely: a cursor that comes back again ends the walk instead of looping forever."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from dashboard.upstream import errors


class CursorPage(Protocol):
    @property
    def cursor(self) -> str | None: ...


P = TypeVar("P", bound=CursorPage)


def follow_cursor(
    fetch: Callable[[str | None], P], *, cursor: str | None = None, max_pages: int | None = None
) -> Iterator[P]:
    """Pages from `fetch(cursor)` until one has no cursor, or `max_pages` pages were read.

    Raises BadResponse if the upstream hands back a cursor it already gave: following it would never end.
    """
    seen: set[str] = set()
    pages = 0
    while True:
        page = fetch(cursor)
        yield page
        pages += 1
        if page.cursor is None or (max_pages is not None and pages >= max_pages):
            return
        if page.cursor in seen or page.cursor == cursor:
            raise errors.BadResponse("the upstream returned the same cursor twice; stopped paging")
        seen.add(page.cursor)
        cursor = page.cursor
