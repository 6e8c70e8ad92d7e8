"""Links to the deliveries list with filters, for every place that points at a slice of the deliveries.

The list's filters are the fields of its filter form (dashboard/web/forms.py DeliveryFilterForm); this
module owns their names on the deliveries side, so models, the admin and alert mails can link to the
list without importing the web app. A test holds the two lists together.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote_plus

from django.urls import reverse

# The deliveries list's query parameters, in the order links spell them.
DELIVERY_LIST_FILTERS = (
    "range", "start", "end", "stream", "tag", "url", "status", "group", "error", "chain", "confirmed",
    "retries", "min_latency", "q", "order",
)  # fmt: skip
# The list's filter of each slice dimension (`SliceFilters.slice`'s keywords), for links from a slice's chart.
SLICE_FILTERS = {"stream_id": "stream", "tag": "tag", "webhook_url": "url", "chain_id": "chain"}


def deliveries_list_query(**filters: str | int | None) -> str:
    """The query string selecting `filters` on the deliveries list; empty values are left out.

    An unknown filter name is a TypeError: the list would ignore it and show everything.
    """
    unknown = set(filters) - set(DELIVERY_LIST_FILTERS)
    if unknown:
        raise TypeError(f"the deliveries list has no filter {', '.join(sorted(unknown))}")
    return query_string(
        (name, filters[name]) for name in DELIVERY_LIST_FILTERS if filters.get(name) not in (None, "")
    )


def query_string(pairs: Iterable[tuple[str, object]]) -> str:
    """What `urllib.parse.urlencode` makes of these pairs (values as their text), each text's quoting remembered: a month's
    chart links ~500 times to the same few streams, tags, URLs and bucket edges, and quoting each again was ~15 µs
    a link."""
    return "&".join(f"{_quoted(name)}={_quoted(str(value))}" for name, value in pairs)


@lru_cache(maxsize=4096)
def _quoted(text: str) -> str:
    return quote_plus(text)


def deliveries_list_url(**filters: str | int | None) -> str:
    """Path of the deliveries list showing `filters`: deliveries_list_url(stream=..., status="failing")."""
    query = deliveries_list_query(**filters)
    return reverse("web:deliveries") + (f"?{query}" if query else "")
