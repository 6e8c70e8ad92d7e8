"""One search box for deliveries: a tx hash, an address, a topic, a block number or an event name
(`event:Transfer`, the events the payload's ABI decodes), matched through the extracted search keys (GIN
index), never through payload text.

The admin's box also takes a stream or delivery id and error text (`parse_admin_search`,
`search_deliveries`); every kind is answered by an index, see `search_deliveries`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dashboard.text import visible

if TYPE_CHECKING:
    from dashboard.deliveries.models import DeliveryQuerySet

_HASH = re.compile(r"^0x[0-9a-f]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")
_BLOCK = re.compile(r"^\d{1,19}$")
# A Solidity identifier, as `decoding` requires of the events it decodes.
_EVENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]{0,63}$")
_PREFIXES = {
    "tx": "tx", "hash": "tx", "address": "addr", "addr": "addr", "topic": "topic", "block": "block", "event": "event",
}

HELP = (
    "Enter a transaction hash or topic (0x + 64 hex), an address (0x + 40 hex), a block number or an event "
    "name (event:Transfer)."
)


_LABELS = {
    "hash": "transaction hash or topic",
    "addr": "address",
    "stream": "stream id",
    "delivery": "delivery id",
    "uuid": "stream or delivery id",
    "error": "error text",
    "event": "event",
}


class SearchError(ValueError):
    """The text is not something the search keys can hold; the message says what is expected."""


@dataclass(frozen=True)
class SearchTerm:
    kind: str  # "hash" (tx or topic), "tx", "topic", "address", "block" or "event"
    value: str
    keys: tuple[str, ...]

    @property
    def label(self) -> str:
        return _LABELS.get(self.kind, self.kind) + f" {visible(self.value)}"


def parse_search(text: str) -> SearchTerm:
    raw = (text or "").strip()
    if not raw:
        raise SearchError(HELP)
    if len(raw) > 200:
        raise SearchError("The search text is too long. " + HELP)
    forced: str | None = None
    prefix, sep, rest = raw.partition(":")
    if sep and prefix.strip().lower() in _PREFIXES:
        forced = _PREFIXES[prefix.strip().lower()]
        raw = rest.strip()
    if forced == "event":
        return SearchTerm("event", raw, (f"event:{event_name(raw)}",))
    value = raw.lower()
    if _HASH.match(value) and forced in (None, "tx", "topic"):
        if forced:
            return SearchTerm(forced, value, (f"{forced}:{value}",))
        return SearchTerm("hash", value, (f"tx:{value}", f"topic:{value}"))
    if _ADDRESS.match(value) and forced in (None, "addr"):
        return SearchTerm("addr", value, (f"addr:{value}",))
    if _BLOCK.match(value) and forced in (None, "block"):
        number = int(value)
        return SearchTerm("block", str(number), (f"block:{number}",))
    raise SearchError(f"“{_shown(raw)}” is not a search key. {HELP}")


def event_name(text: str) -> str:
    """An event name as the search keys and the event rollup spell it (lower case: `Transfer` is
    `transfer`); SearchError when the text cannot be an event's name."""
    raw = text.strip()
    if not _EVENT.match(raw):
        raise SearchError(f"“{_shown(raw)}” is not an event name: letters, digits, _ or $, as in event:Transfer.")
    return raw.lower()


# --- The admin's search box: the keys above, plus stream / delivery ids and error text. -----------------

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ID_PREFIXES = {"stream": "stream", "delivery": "delivery", "id": "delivery"}
_ERROR_PREFIXES = {"error", "err"}
ERROR_TEXT_MIN = 3
# Error text with a part the templates mask is looked for among at most this many of the newest distinct
# messages of the error groups it falls in (`ErrorMessage`, read through its (error_group, last_seen) index).
ERROR_TEXT_SCAN_MESSAGES = 20_000
# The deliveries of at most this many matching messages (the newest) are listed.
ERROR_MESSAGES_MAX = 1_000
# Error groups one search may select; their templates are far fewer than deliveries.
ERROR_GROUPS_MAX = 200

ADMIN_HELP = (
    "Search by transaction hash or topic (0x + 64 hex), address (0x + 40 hex, any case), block number, "
    "event name (event:Transfer), stream or delivery id (a UUID), or error text (\u201cerror: timeout\u201d; "
    "plain words are read as error text). Prefixes narrow the kind: tx:, topic:, address:, block:, event:, "
    "stream:, id:, error:."
)


def parse_admin_search(text: str) -> SearchTerm:
    """Like `parse_search`, plus stream and delivery ids and error text; raises SearchError with a message."""
    raw = (text or "").strip()
    if not raw:
        raise SearchError(ADMIN_HELP)
    if len(raw) > 200:
        raise SearchError("The search text is too long (200 characters at most).")
    if _CONTROL.search(raw):
        raise SearchError("The search text contains control characters.")
    prefix, sep, rest = raw.partition(":")
    prefix = prefix.strip().lower()
    if sep and prefix in _ID_PREFIXES:
        value = rest.strip().lower()
        if not _UUID.match(value):
            kind = _ID_PREFIXES[prefix]
            raise SearchError(f"\u201c{_shown(rest.strip())}\u201d is not a {kind} id: expected a UUID.")
        return SearchTerm(_ID_PREFIXES[prefix], value, ())
    if sep and prefix in _ERROR_PREFIXES:
        return _error_term(rest)
    if _UUID.match(raw.lower()):
        return SearchTerm("uuid", raw.lower(), ())
    try:
        return parse_search(raw)
    except SearchError:
        # Text that was meant as a key (a prefix, hex or digits) gets the key message; words are error text.
        if sep and prefix == "event":
            raise
        if (sep and prefix in _PREFIXES) or raw.lower().startswith("0x") or raw.isdigit():
            raise SearchError(f"\u201c{_shown(raw)}\u201d is not a search key. {ADMIN_HELP}") from None
        return _error_term(raw)


def _error_term(text: str) -> SearchTerm:
    value = " ".join(text.split())
    if len(value) < ERROR_TEXT_MIN:
        raise SearchError(f"Error text needs at least {ERROR_TEXT_MIN} characters.")
    return SearchTerm("error", value, ())


def _shown(text: str) -> str:
    """Typed text as a message quotes it: clipped, and a direction override cannot reverse the sentence."""
    return visible(text if len(text) <= 70 else text[:67] + "\u2026")


@dataclass(frozen=True)
class SearchOutcome:
    deliveries: DeliveryQuerySet
    # What was searched, in words, for the page to show beside the results.
    note: str


def search_deliveries(deliveries: DeliveryQuerySet, term: SearchTerm) -> SearchOutcome:
    """Narrow `deliveries` to the term. Each kind is served by an index, never by reading payloads:

    - keys (tx, topic, address, block): `search_keys && ARRAY[...]`, through the GIN index of their hashes;
    - stream id: the (stream_id, date) btree; a delivery id: the primary key; a bare UUID is tried as a
      delivery id first (one probe), then as a stream id;
    - error text: error *groups* are matched first, by their masked template (`error_template` of the
      text, so "ECONNREFUSED 203.0.113.7:443" finds "connect ECONNREFUSED <ip>"). That ILIKE runs over
      the error-group table, one row per distinct masked message (hundreds, not millions). When the
      templates contain the text, deliveries come through the (error_group, date) index. When the text has
      variable parts the templates hide (an IP, a host), it is looked for among the newest
      ERROR_TEXT_SCAN_MESSAGES distinct messages of those groups (`ErrorMessage`), and the deliveries of the
      messages that contain it come through the index on their message's digest: never a scan of
      error_message in the deliveries.
    """
    from dashboard.deliveries.models import Delivery

    if term.keys:
        return SearchOutcome(key_matches(deliveries, term.keys), f"Searched the extracted keys for {term.label}.")
    if term.kind == "delivery" or (term.kind == "uuid" and Delivery.objects.filter(pk=term.value).exists()):
        return SearchOutcome(deliveries.filter(pk=term.value), f"Delivery {term.value}.")
    if term.kind in ("stream", "uuid"):
        return SearchOutcome(deliveries.filter(stream_id=term.value), f"Deliveries of stream {term.value}.")
    if term.kind == "error":
        return search_error_text(deliveries, term.value)
    raise SearchError(f"Cannot search for {term.label}.")


# A key held by at most this many deliveries is answered from its complete set of ids, read through the
# GIN index; the page then sorts that set by date. A key held by more is frequent, and a newest-first walk
# of the date index meets one of its rows every few rows.
KEY_CANDIDATES = 2_000
# A key the column statistics measure in at least this share of the rows is frequent without asking the
# index: reading its posting list alone takes longer than the walk (2 M entries ~ 160 ms).
FREQUENT_SHARE = 0.01

# The table is partitioned (partitions.py): autovacuum keeps each partition's statistics, not the parent's, so a
# key's share of the rows is its share in each partition weighted by the partition's rows. The partitions, with
# what changes when their statistics do (a new ANALYZE, a rewrite, the row estimate):
_PARTITIONS = """
SELECT c.relname, c.relfilenode, greatest(c.reltuples, 0),
       greatest(pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid))
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = %s::regclass
 ORDER BY 1
"""
# ... and the search keys each one's statistics count as most common, with their share of its rows.
_COMMON_KEYS = """
SELECT tablename, most_common_elems::text::text[], most_common_elem_freqs
  FROM pg_stats
 WHERE schemaname = current_schema() AND tablename = ANY(%s) AND attname = 'search_keys'
"""


@dataclass(frozen=True)
class _CommonKeys:
    partitions: tuple[tuple[Any, ...], ...]
    shares: dict[str, dict[str, float]]


# Per database connection alias: the common keys of the partitions as they were when last read. Read again
# whenever a partition is added, dropped, rewritten or analysed (the partitions' row changes), which is rare
# beside searches; reading them costs a few milliseconds, checking whether they changed a fraction of one.
_common_keys: dict[str, _CommonKeys] = {}


def key_share(cursor: Any, alias: str, table: str, keys: tuple[str, ...] | list[str]) -> float:
    """The share of the table's rows the column statistics count for the most common of `keys` (0 for keys
    outside every partition's most common ones)."""
    cursor.execute(_PARTITIONS, [table])
    partitions = tuple(tuple(row) for row in cursor.fetchall())
    known = _common_keys.get(alias)
    if known is None or known.partitions != partitions:
        cursor.execute(_COMMON_KEYS, [[name for name, *_rest in partitions]])
        known = _CommonKeys(partitions, {
            name: dict(zip(elements or (), shares or (), strict=False)) for name, elements, shares in cursor.fetchall()
        })
        _common_keys[alias] = known
    total = sum(rows for _name, _file, rows, _analysed in partitions)
    if not total:
        return 0.0
    counted = sum(
        rows * max((known.shares.get(name, {}).get(key, 0.0) for key in keys), default=0.0)
        for name, _file, rows, _analysed in partitions
    )
    return float(counted / total)


def key_matches(deliveries: DeliveryQuerySet, keys: tuple[str, ...] | list[str]) -> DeliveryQuerySet:
    """`deliveries` holding any of the keys, read the way the key's frequency calls for.

    Postgres has no frequency for a key outside the few most common ones and assumes 0.5 % of the rows,
    so `search_keys && ARRAY[...] ORDER BY date DESC LIMIT 50` walks the date index and filters the whole
    table when the key is rare (2.4 s at 2 M rows for one tx hash). Instead the column statistics are asked
    first whether a key is frequent (`key_share`) and, when it is not, the ids holding it are fetched through
    the GIN index (a bitmap scan, bounded by KEY_CANDIDATES). Up to that bound the set is complete and
    the result is `id = ANY(those ids) AND date = ANY(their dates)`: every order, filter and page the caller adds
    stays exact and reads only those rows. A frequent key keeps the plain overlap, whose date-ordered walk
    finds a match every 1/share rows.
    """
    from django.db import connections

    from dashboard.deliveries.models import DeliveryQuerySet

    with connections[deliveries.db].cursor() as cursor:
        if key_share(cursor, deliveries.db, deliveries.model._meta.db_table, keys) >= FREQUENT_SHARE:
            return deliveries.with_any_key(keys)
    # The whole table's rows holding a key (not narrowed to the viewer's streams: the page is, below), by the
    # same overlap as a frequent key's, unordered.
    whole = DeliveryQuerySet(deliveries.model, using=deliveries.db)
    found = list(whole.with_any_key(keys).values_list("id", "date")[: KEY_CANDIDATES + 1])
    if len(found) > KEY_CANDIDATES:
        return deliveries.with_any_key(keys)
    # The dates too: `date = ANY(…)` prunes the partitions holding none of them and bounds any walk of the date
    # index to those dates' entries (else the planner may walk every partition's date index newest first,
    # filtering by id, for a few hundred matches spread over the table).
    return deliveries.filter(pk__any=[pk for pk, _date in found], date__any=sorted({date for _pk, date in found}))


def search_error_text(deliveries: DeliveryQuerySet, text: str) -> SearchOutcome:
    """Failing deliveries whose current error message contains the text, found through the error groups and
    the distinct messages (see search_deliveries): the search box's, the admin's and the deliveries list's
    `error=` filter."""
    from django.db import connections
    from django.db.models import Q
    from django.db.models.functions import MD5

    from dashboard.deliveries.grouping import error_template
    from dashboard.deliveries.models import ErrorGroup

    text = " ".join(text.split())
    template = error_template(text)
    group_ids = list(
        ErrorGroup.objects.filter(Q(template__icontains=text) | Q(template__icontains=template))
        .order_by("-last_seen")
        .values_list("id", flat=True)[: ERROR_GROUPS_MAX + 1]
    )
    if not group_ids:
        return SearchOutcome(deliveries.none(), f"No error message group matches \u201c{_shown(text)}\u201d.")
    more = len(group_ids) > ERROR_GROUPS_MAX
    group_ids = group_ids[:ERROR_GROUPS_MAX]
    groups = f"{len(group_ids)}{'+' if more else ''} error group{'s' if len(group_ids) != 1 else ''}"
    if template.lower() == text.lower() or _template_matches_exactly(group_ids, text):
        # Every message of these groups contains the text: no need to look at the messages.
        return SearchOutcome(
            deliveries.filter(error_group_id__in=group_ids),
            f"Searched error messages for \u201c{_shown(text)}\u201d: {groups} match.",
        )
    # The text has parts the templates mask: it is looked for among each group's newest distinct messages (one
    # range of the (error_group, last_seen) index a group), and the deliveries come by their messages' digests.
    per_group = ERROR_TEXT_SCAN_MESSAGES // len(group_ids)  # at least 100: ERROR_GROUPS_MAX groups at most
    with connections[deliveries.db].cursor() as cursor:
        cursor.execute(
            """
            SELECT m.digest
              FROM unnest(%s::bigint[]) AS g(id)
             CROSS JOIN LATERAL (
                   SELECT digest, message, last_seen FROM deliveries_errormessage
                    WHERE error_group_id = g.id ORDER BY last_seen DESC LIMIT %s
             ) AS m
             -- As the text was typed: whitespace runs read as one space, any case.
             WHERE strpos(lower(regexp_replace(m.message, '\\s+', ' ', 'g')), lower(%s)) > 0
             ORDER BY m.last_seen DESC
             LIMIT %s
            """,
            [group_ids, per_group, text, ERROR_MESSAGES_MAX + 1],
        )
        found = [digest for (digest,) in cursor.fetchall()]
    if not found:
        return SearchOutcome(
            deliveries.none(),
            f"No error message contains \u201c{_shown(text)}\u201d ({groups} with a matching template searched).",
        )
    clipped = len(found) > ERROR_MESSAGES_MAX
    found = found[:ERROR_MESSAGES_MAX]
    messages = f"{'the newest ' if clipped else ''}{len(found):,} message{'s' if len(found) != 1 else ''}"
    return SearchOutcome(
        deliveries.alias(message_digest=MD5("error_message")).filter(message_digest__any=found),
        f"Searched error messages for \u201c{_shown(text)}\u201d: {messages} of {groups} match.",
    )


def _template_matches_exactly(group_ids: list[int], text: str) -> bool:
    """True when every selected group's template itself contains the text (no masked part in between)."""
    from dashboard.deliveries.models import ErrorGroup

    needle = text.lower()
    templates: Any = ErrorGroup.objects.filter(id__in=group_ids).values_list("template", flat=True)
    return all(needle in t.lower() for t in templates)
