"""Error groups: every error message reduced to a template with its variable parts masked, so equal
failures group together, and the per-group counts kept exact by every writer of deliveries."""

from __future__ import annotations

import hashlib
import operator
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache, reduce
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import Max, Min, OuterRef, Q, Subquery

from dashboard import visibility
from dashboard.deliveries.write_lock import take_write_lock

if TYPE_CHECKING:
    from dashboard.deliveries.models import ErrorGroup

# Order matters: URLs before hosts, ids and addresses before bare hex, IPs and hosts before bare numbers.
_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.I), "<url>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b0x[0-9a-f]{40}\b", re.I), "<address>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    # IPv6 (with at least two colons and a hex digit, optionally bracketed with a port) before IPv4.
    (re.compile(r"\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d+)?", re.I), "<ip>"),
    (re.compile(r"(?<![\w:])(?=[0-9a-f:]*[0-9a-f])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])", re.I), "<ip>"),
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])"), "<ip>"),
    (re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}(?::\d{1,5})?\b", re.I), "<host>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b", re.I), "<duration>"),
    (re.compile(r"\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b", re.I), "<hex>"),
    # HTTP status codes stay: a 404 and a 500 are different failures, not one with a variable part.
    (re.compile(r"(?<!status code )(?<!status )(?<!HTTP )\b\d+(?:\.\d+)?\b"), "<n>"),
]


@lru_cache(maxsize=8192)
def error_template(message: str) -> str:
    """The message with its variable parts masked, so equal failures group together."""
    text = " ".join(message.split())
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return text[:1000]


def error_fingerprint(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()


def group_ids_for(cursor: Any, messages: Iterable[tuple[str, datetime]]) -> dict[str, int]:
    """Error group id per (message, date) of a batch, creating the groups that do not exist yet; each distinct
    message is recorded (`ErrorMessage`) with the newest date it was seen at."""
    templates: dict[str, tuple[str, datetime, datetime]] = {}
    message_fp: dict[str, str] = {}
    newest: dict[str, datetime] = {}
    for message, date in messages:
        if not message:
            continue
        newest[message] = max(date, newest.get(message, date))
        fp = message_fp.get(message)
        template = error_template(message)
        if fp is None:
            fp = error_fingerprint(template)
            message_fp[message] = fp
        seen = templates.get(fp)
        if seen is None:
            templates[fp] = (template, date, date)
        else:
            templates[fp] = (seen[0], min(seen[1], date), max(seen[2], date))
    if not templates:
        return {}
    fps = sorted(templates)
    cursor.execute(
        """
        INSERT INTO deliveries_errorgroup (fingerprint, template, first_seen, last_seen, delivery_count)
        SELECT fp, template, first_seen, last_seen, 0
          FROM unnest(%s::varchar[], %s::text[], %s::timestamptz[], %s::timestamptz[])
               AS t(fp, template, first_seen, last_seen)
        ON CONFLICT (fingerprint) DO NOTHING
        """,
        [fps, [templates[f][0] for f in fps], [templates[f][1] for f in fps], [templates[f][2] for f in fps]],
    )
    cursor.execute("SELECT fingerprint, id FROM deliveries_errorgroup WHERE fingerprint = ANY(%s::varchar[])", [fps])
    by_fp = dict(cursor.fetchall())
    group_ids = {message: by_fp[fp] for message, fp in message_fp.items()}
    _record_messages(cursor, group_ids, newest)
    return group_ids


def _record_messages(cursor: Any, group_ids: dict[str, int], newest: dict[str, datetime]) -> None:
    """Insert the batch's new distinct messages and move the others' last_seen forward; the digest is computed
    by Postgres, as the deliveries' message index computes it."""
    texts = sorted(group_ids)
    cursor.execute(
        """
        INSERT INTO deliveries_errormessage AS m (digest, message, error_group_id, last_seen)
        SELECT md5(t.message), t.message, t.group_id, t.seen
          FROM unnest(%s::text[], %s::bigint[], %s::timestamptz[]) AS t(message, group_id, seen)
        ON CONFLICT (digest) DO UPDATE SET last_seen = EXCLUDED.last_seen WHERE m.last_seen < EXCLUDED.last_seen
        """,
        [texts, [group_ids[t] for t in texts], [newest[t] for t in texts]],
    )


def rebuild_error_messages(cursor: Any, source_id: int | None = None) -> None:
    """Record the distinct messages of the stored failing deliveries (of one source, all when None), as ingest
    would have: for rows written another way (the generator, a restored dump). Runs under the write lock."""
    only = "" if source_id is None else "AND source_id = %(source)s"
    cursor.execute(
        f"""
        INSERT INTO deliveries_errormessage AS m (digest, message, error_group_id, last_seen)
        SELECT md5(error_message), error_message, max(error_group_id), max(date)
          FROM deliveries_delivery
         WHERE error_group_id IS NOT NULL {only}
         GROUP BY error_message
        ON CONFLICT (digest) DO UPDATE SET last_seen = EXCLUDED.last_seen WHERE m.last_seen < EXCLUDED.last_seen
        """,  # noqa: S608 - fixed SQL; values are parameters
        {"source": source_id},
    )


def apply_group_changes(
    cursor: Any, moved: dict[tuple[int, str], int], gained: dict[int, tuple[datetime, datetime]] | None = None
) -> None:
    """Adjust the counts by what moved in or out, given per (group, stream): each group's own count and its count
    per stream (`ErrorGroupStream`). `gained` holds, for groups that only gained rows, the first and last date of
    those rows: their first/last seen move by these alone. Every other group's are re-read from the (group, date)
    index (a row that left may have been its first or last).

    Called inside a writer's transaction, under the write lock."""
    # Every group named, even at a net zero: one that lost a row and gained another has its span re-read.
    delta: dict[int, int] = defaultdict(int)
    for (group, _stream), n in moved.items():
        delta[group] += n
    keys = sorted(key for key, n in moved.items() if n)
    if keys:
        cursor.execute(
            """
            -- An update of the rows there and an insert of the others, not INSERT … ON CONFLICT: Postgres checks
            -- the row to insert (a negative delta) against delivery_count >= 0 before it looks for the conflict.
            WITH v AS (SELECT * FROM unnest(%s::bigint[], %s::varchar[], %s::int[]) AS v(g, s, n)),
            updated AS (
                UPDATE deliveries_errorgroupstream c SET delivery_count = c.delivery_count + v.n
                  FROM v WHERE c.error_group_id = v.g AND c.stream_id = v.s
             RETURNING c.error_group_id, c.stream_id
            )
            INSERT INTO deliveries_errorgroupstream (error_group_id, stream_id, delivery_count)
            SELECT v.g, v.s, v.n FROM v
             WHERE NOT EXISTS (SELECT 1 FROM updated u WHERE u.error_group_id = v.g AND u.stream_id = v.s)
            """,
            [[g for g, _ in keys], [st for _, st in keys], [moved[k] for k in keys]],
        )
        emptied = [key for key in keys if moved[key] < 0]
        if emptied:
            # A stream whose last delivery left a group counts there no more.
            cursor.execute(
                """
                DELETE FROM deliveries_errorgroupstream c
                 USING unnest(%s::bigint[], %s::varchar[]) AS v(g, s)
                 WHERE c.error_group_id = v.g AND c.stream_id = v.s AND c.delivery_count = 0
                """,
                [[g for g, _ in emptied], [st for _, st in emptied]],
            )
    spans = gained or {}
    widened = sorted(g for g in delta if g in spans)
    if widened:
        cursor.execute(
            """
            UPDATE deliveries_errorgroup g
               SET delivery_count = g.delivery_count + v.delta,
                   -- A group counting nothing before holds only the gained rows now.
                   first_seen = CASE WHEN g.delivery_count = 0 THEN v.first ELSE LEAST(g.first_seen, v.first) END,
                   last_seen = CASE WHEN g.delivery_count = 0 THEN v.last ELSE GREATEST(g.last_seen, v.last) END
              FROM unnest(%s::bigint[], %s::int[], %s::timestamptz[], %s::timestamptz[]) AS v(id, delta, first, last)
             WHERE g.id = v.id
            """,
            [widened, [delta[i] for i in widened], [spans[i][0] for i in widened], [spans[i][1] for i in widened]],
        )
    reread = sorted(g for g in delta if g not in spans)
    if not reread:
        return
    cursor.execute(
        """
        UPDATE deliveries_errorgroup g
           SET delivery_count = g.delivery_count + v.delta,
               first_seen = COALESCE(
                   (SELECT min(d.date) FROM deliveries_delivery d WHERE d.error_group_id = g.id), g.first_seen),
               last_seen = COALESCE(
                   (SELECT max(d.date) FROM deliveries_delivery d WHERE d.error_group_id = g.id), g.last_seen)
          FROM unnest(%s::bigint[], %s::int[]) AS v(id, delta)
         WHERE g.id = v.id
        """,
        [reread, [delta[i] for i in reread]],
    )


def recount_error_groups(group_ids: list[int] | None = None) -> None:
    """Recompute the count, the counts per stream and the first/last seen of the given groups (all when None) from
    the stored rows: a repair, and what bulk loaders that bypass the write path call afterwards."""
    only = "" if group_ids is None else "AND g.id = ANY(%(ids)s)"
    params = {"ids": group_ids} if group_ids is not None else None
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        of_groups = "" if group_ids is None else "AND error_group_id = ANY(%(ids)s)"
        cursor.execute(
            f"DELETE FROM deliveries_errorgroupstream WHERE TRUE {of_groups}",  # noqa: S608 - fixed SQL
            params,
        )
        cursor.execute(
            f"""
            INSERT INTO deliveries_errorgroupstream (error_group_id, stream_id, delivery_count)
            SELECT error_group_id, stream_id, count(*) FROM deliveries_delivery
             WHERE error_group_id IS NOT NULL {of_groups}
             GROUP BY error_group_id, stream_id
            """,  # noqa: S608 - fixed SQL; values are parameters
            params,
        )
        cursor.execute(
            f"""
            UPDATE deliveries_errorgroup g
               SET delivery_count = COALESCE(s.n, 0),
                   first_seen = COALESCE(s.first_seen, g.first_seen),
                   last_seen = COALESCE(s.last_seen, g.last_seen)
              FROM deliveries_errorgroup g2
              LEFT JOIN (
                SELECT error_group_id, count(*) AS n, min(date) AS first_seen, max(date) AS last_seen
                  FROM deliveries_delivery WHERE error_group_id IS NOT NULL GROUP BY error_group_id
              ) s ON s.error_group_id = g2.id
             WHERE g.id = g2.id {only}
            """,  # noqa: S608 - fixed SQL; values are parameters
            params,
        )


def first_stored_period() -> datetime | None:
    """The six-hour period of the viewer's oldest stored delivery: where their error groups' figures summed from the
    period rollup begin (an older period holds only deliveries retention deleted); None with nothing stored."""
    from dashboard.deliveries.models import Delivery, PeriodRollup

    oldest = Delivery.objects.order_by("date").values_list("date", flat=True).first()
    return PeriodRollup.period_of(oldest) if oldest is not None else None


def as_the_viewer_sees(groups: Sequence[ErrorGroup]) -> None:
    """Narrow each group's first and last seen to the streams the current viewer sees, in memory (the instances are
    for display and never saved): unchanged for who sees every stream. For a team member, their streams' first and
    last stored delivery in the group: the first and last six-hour periods holding one (the period rollup's group
    index walked from each end, from the period of the oldest stored delivery on), then the moments read from the
    deliveries of those periods (the period's start where none is left). Their counts are the API's
    (`api.error_groups`). Four queries for any number of groups."""
    from dashboard.deliveries.models import ROLLUP_PERIOD, Delivery, ErrorGroup, PeriodRollup

    if visibility.current().everything or not groups:
        return
    since = first_stored_period()
    spans: dict[int, dict[str, Any]] = {}
    if since is not None:
        # Scoped to the viewer's streams inside each subquery; the groups themselves are already theirs.
        periods = PeriodRollup.objects.filter(error_group_id=OuterRef("pk"), hour__gte=since)
        spans = {
            row["pk"]: dict(row)
            for row in ErrorGroup._base_manager.filter(pk__in=[g.pk for g in groups]).values("pk").annotate(
                first=Subquery(periods.order_by("hour").values("hour")[:1]),
                last=Subquery(periods.order_by("-hour").values("hour")[:1]),
            )
            if row["first"] is not None
        }

    def moments(edge: str, pick: type[Min] | type[Max]) -> dict[int, datetime]:
        ranges = [Q(error_group_id=pk, date__gte=row[edge], date__lt=row[edge] + ROLLUP_PERIOD)
                  for pk, row in spans.items()]
        if not ranges:
            return {}
        rows = Delivery.objects.filter(reduce(operator.or_, ranges)).values("error_group_id").annotate(at=pick("date"))
        return {row["error_group_id"]: row["at"] for row in rows.order_by()}

    firsts, lasts = moments("first", Min), moments("last", Max)
    for group in groups:
        row = spans.get(group.pk)
        if row is not None:
            group.first_seen = firsts.get(group.pk, row["first"])
            group.last_seen = lasts.get(group.pk, row["last"])
