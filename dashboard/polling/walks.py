"""Walking the upstream history of one source into the database.

Every read of the history is a *walk*: pages from the newest towards the oldest, each page stored in one
transaction together with the walk's checkpoint (the cursor of the next page). A walk that dies (killed
worker, dropped connection, upstream failure after the client's retries) resumes at the first page it had
not stored. While a page is stored, the walk's reader thread fetches and parses the next one (one page
ahead at most); a read's error is raised in that page's turn, once the pages before it are stored. Three
kinds:

- head: down to the first page that reaches below the source's `synced_through` (everything at or before
  it is stored) and holds records already stored and unchanged, then `synced_through` moves up to the
  newest record the walk saw. The first head walk of a source reads the whole history.
- revisit: the retry window (RETRY_WINDOW_HOURS back from the newest record), re-read in full because a
  retry changes the record in place (`retries`, `errorMessage`, the payload's `retries`); unchanged records
  cost a digest comparison and no write.
- backfill: the whole history, from the `backfill_history` command, with a progress bar.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from dashboard.deliveries.ingest import ParsedBatch, StoreResult, parse_batch, store_batch
from dashboard.heap import fewer_collections
from dashboard.polling.models import HistoryWalk, WalkKind
from dashboard.sources.clients import streams_client
from dashboard.sources.models import Source
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.errors import BadRequest, BadResponse, NotFound
from dashboard.upstream.history import HistoryPage, fetch_history_page
from dashboard.upstream.parsing import as_datetime

log = logging.getLogger(__name__)

# A head walk reads this far below `synced_through`, for records that show up slightly out of date order.
HEAD_OVERLAP = timedelta(minutes=2)

PageCallback = Callable[[HistoryWalk, HistoryPage, StoreResult], None]


@dataclass
class WalkOutcome:
    walk: HistoryWalk
    pages: int = 0
    stored: StoreResult = field(default_factory=StoreResult)
    # False when the time budget ran out first; the checkpoint holds the place.
    complete: bool = False
    resumed: bool = False


@dataclass
class PollResult:
    source: str
    pages: int
    stored: StoreResult
    skipped: str = ""
    complete: bool = True
    revisited: bool = False


def walk_history(
    source: Source,
    kind: str,
    *,
    client: UpstreamClient,
    stop_before: datetime | None,
    deadline: float | None = None,
    restart: bool = False,
    max_pages: int | None = None,
    on_page: PageCallback | None = None,
) -> WalkOutcome:
    """Walk (or resume walking) the history; returns once complete, past `deadline` or after `max_pages`."""
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"walk-{source.pk}-{kind}")
    try:
        with fewer_collections():
            return _walk(
                source, kind, reader, client=client, stop_before=stop_before, deadline=deadline, restart=restart,
                max_pages=max_pages, on_page=on_page,
            )
    finally:
        # No read outlives the walk (its caller closes the client next): after an error, the page being read
        # ahead is waited for and dropped, unstored; the checkpoint still points at it.
        reader.shutdown(wait=True, cancel_futures=True)


def _read_page(client: UpstreamClient, cursor: str) -> tuple[HistoryPage, ParsedBatch]:
    """One page fetched and parsed: all a page costs before the database sees it."""
    page = fetch_history_page(client, limit=settings.HISTORY_PAGE_SIZE, cursor=cursor or None)
    return page, parse_batch(page.records)


def _walk(
    source: Source,
    kind: str,
    reader: ThreadPoolExecutor,
    *,
    client: UpstreamClient,
    stop_before: datetime | None,
    deadline: float | None,
    restart: bool,
    max_pages: int | None,
    on_page: PageCallback | None,
) -> WalkOutcome:
    now = timezone.now()
    # get_or_create: two walkers of one source that bypass the poll lock must not collide on the row.
    state, created = HistoryWalk.objects.get_or_create(
        source=source, kind=kind, defaults={"started_at": now, "updated_at": now}
    )
    resumed = not created and not state.finished and not restart
    if not resumed:
        _start_afresh(state, stop_before, now)
    outcome = WalkOutcome(walk=state, resumed=resumed)
    followed: set[str] = set()

    def may_read(taken: int) -> bool:
        """Whether the page after `taken` pages may be read: the budget is checked before each read."""
        return (deadline is None or time.monotonic() <= deadline) and (max_pages is None or taken < max_pages)

    def read(cursor: str) -> Future[tuple[HistoryPage, ParsedBatch]]:
        followed.add(cursor)
        # The reader thread's log lines (the upstream client's retries) carry this walk's context variables (the
        # request id); Celery's task id is kept per thread by Celery and is missing from them.
        return reader.submit(contextvars.copy_context().run, _read_page, client, cursor)

    ahead: Future[tuple[HistoryPage, ParsedBatch]] | None = None
    while True:
        if ahead is None:
            if not may_read(outcome.pages):
                return outcome
            ahead = read(state.cursor)
        try:
            # A fetch or parse error of this page is raised here, once every page before it is stored.
            page, batch = ahead.result()
        except (BadRequest, NotFound) as exc:
            if not (outcome.resumed and outcome.pages == 0 and state.cursor):
                raise
            # A checkpoint cursor the upstream no longer accepts (expired, or issued before a redeploy)
            # would fail every run: start again from the newest page; the stop point stays where it was.
            log.warning(
                "source %s: the upstream refused the %s walk's saved cursor (%s); walking again from the newest page",
                source.name, kind, exc.message,
            )
            _start_afresh(state, stop_before, timezone.now())
            outcome.resumed = False
            followed.clear()
            ahead = None
            continue
        ahead = None
        dates = [d for d in (as_datetime(r.get("date")) for r in page.records) if d is not None]
        below_stop = state.stop_before is not None and any(d < state.stop_before for d in dates)
        repeated = page.cursor is not None and page.cursor in followed
        # The next page is read (fetched and parsed, in the reader thread) while the database stores this one,
        # when this one cannot end the walk and the budget allows another: parsing is Python work the size of
        # the write itself, and storing mostly waits for the server with the GIL released. One page ahead at
        # most, so a walk holds two pages whatever its length; a page read ahead is always stored.
        if page.cursor is not None and not below_stop and not repeated and may_read(outcome.pages + 1):
            ahead = read(page.cursor)
        with transaction.atomic():
            stored = store_batch(source, batch)
            # A head walk ends where it meets records it already holds, unchanged; a date alone is not
            # enough (one record stamped in the future by a skewed clock would cut every later walk short).
            reached_stop = below_stop and (kind != WalkKind.HEAD or stored.unchanged > 0)
            # An upstream that hands out a cursor already followed would keep this walk going in circles: the
            # page is stored, the walk ends unfinished (nothing is marked synced) and the next run starts
            # afresh.
            circular = repeated and not reached_stop
            done = page.cursor is None or reached_stop or circular
            stored.rejected.extend(f"not a record: {item!r}"[:200] for item in page.malformed)
            state.cursor = page.cursor or ""
            state.pages += 1
            state.records += len(page.records)
            if page.total is not None and page.total >= 0:
                state.upstream_total = page.total
            if state.top_date is None and dates:
                state.top_date = max(dates)
            state.updated_at = timezone.now()
            state.finished_at = state.updated_at if done else None
            state.save()
        outcome.pages += 1
        outcome.stored.add(stored)
        if on_page is not None:
            on_page(state, page, stored)
        if circular:
            raise BadResponse(
                f"the upstream returned a history cursor it had already given (after {state.pages} pages); "
                "the walk stops and starts again from the newest page"
            )
        if done:
            outcome.complete = True
            return outcome


def _start_afresh(state: HistoryWalk, stop_before: datetime | None, now: datetime) -> None:
    state.cursor = ""
    state.top_date = None
    state.stop_before = stop_before
    state.pages = 0
    state.records = 0
    state.upstream_total = None
    state.started_at = now
    state.updated_at = now
    state.finished_at = None
    state.save()


def mark_synced(source: Source, walk: HistoryWalk) -> None:
    """A complete head or backfill walk: everything at or before its top is stored."""
    if walk.top_date is not None:
        source.record_synced_through(walk.top_date)


def _record_failure(source: Source, exc: Exception) -> None:
    try:
        source.record_failure(exc)
    except DatabaseError:
        # The database itself failed (perhaps what raised `exc`): nothing can be recorded now.
        log.warning("source %s: could not record the poll failure: %s", source.name, exc)


def _deadline(budget: float | None) -> float | None:
    return time.monotonic() + budget if budget else None


def poll_head(
    source: Source,
    *,
    client: UpstreamClient | None = None,
    max_pages: int | None = None,
    budget_seconds: float | None = None,
) -> PollResult:
    """Read what is new at the head of the history (the whole history the first time).

    Sync state (success, failure, lag, records per poll) is recorded on the source; upstream errors are
    re-raised after that.
    """
    own_client = client is None
    client = client or streams_client(source)
    deadline = _deadline(budget_seconds if budget_seconds is not None else settings.POLL_TIME_BUDGET_SECONDS)
    total = StoreResult()
    pages = 0
    complete = False
    newest: datetime | None = None
    source.record_poll_started()
    try:
        # A walk killed earlier is finished first; then one fresh walk covers what arrived meanwhile.
        for _ in range(2):
            stop = source.synced_through - HEAD_OVERLAP if source.synced_through else None
            outcome = walk_history(
                source, WalkKind.HEAD, client=client, stop_before=stop, deadline=deadline, max_pages=max_pages
            )
            pages += outcome.pages
            total.add(outcome.stored)
            if outcome.walk.top_date and (newest is None or outcome.walk.top_date > newest):
                newest = outcome.walk.top_date
            complete = outcome.complete
            if not complete:
                break
            mark_synced(source, outcome.walk)
            if outcome.walk.stop_before is None:
                # A walk of the whole history has read the retry window too.
                source.record_revisit(outcome.walk.started_at)
            if not outcome.resumed:
                break
    except Exception as exc:
        _record_failure(source, exc)
        raise
    finally:
        if own_client:
            client.close()
    source.record_success(records=total.written, newest_date=newest)
    log.info(
        "source %s: head poll, %d pages, %d new, %d updated, %d unchanged, %d rejected%s",
        source.name, pages, total.inserted, total.updated, total.unchanged, len(total.rejected),
        "" if complete else " (time budget used up; continues next run)",
    )
    return PollResult(source=source.name, pages=pages, stored=total, complete=complete)


def revisit_due(source: Source, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    if HistoryWalk.objects.filter(source=source, kind=WalkKind.REVISIT, finished_at__isnull=True).exists():
        return True
    interval = timedelta(seconds=settings.REVISIT_INTERVAL_SECONDS)
    return source.last_revisit_at is None or now - source.last_revisit_at >= interval


def revisit_retry_window(
    source: Source, *, client: UpstreamClient | None = None, budget_seconds: float | None = None
) -> PollResult:
    """Re-read the retry window in full and update the records that changed since they were stored."""
    own_client = client is None
    client = client or streams_client(source)
    deadline = _deadline(budget_seconds if budget_seconds is not None else settings.POLL_TIME_BUDGET_SECONDS)
    # The window is measured from the newest upstream record, not our clock: the upstream's own clock
    # decides which records it still retries.
    reference = source.newest_upstream_date or timezone.now()
    stop = reference - timedelta(hours=settings.RETRY_WINDOW_HOURS)
    try:
        outcome = walk_history(source, WalkKind.REVISIT, client=client, stop_before=stop, deadline=deadline)
    except Exception as exc:
        _record_failure(source, exc)
        raise
    finally:
        if own_client:
            client.close()
    if outcome.complete:
        finished = outcome.walk.finished_at or timezone.now()
        source.record_revisit(finished)
    log.info(
        "source %s: retry-window revisit, %d pages, %d new, %d updated, %d unchanged%s",
        source.name, outcome.pages, outcome.stored.inserted, outcome.stored.updated, outcome.stored.unchanged,
        "" if outcome.complete else " (time budget used up; continues next run)",
    )
    return PollResult(
        source=source.name, pages=outcome.pages, stored=outcome.stored, complete=outcome.complete, revisited=True
    )


def poll(source: Source, *, client: UpstreamClient | None = None) -> PollResult:
    """One scheduled poll: the head, then the retry window when its revisit is due."""
    own_client = client is None
    client = client or streams_client(source)
    # One budget for the whole poll: the revisit gets what the head walk left of it, so the two together
    # stop taking pages before the task's soft time limit.
    deadline = time.monotonic() + settings.POLL_TIME_BUDGET_SECONDS
    try:
        result = poll_head(source, client=client)
        # At most REVISIT_SLICE_SECONDS of it: a long revisit goes on at the next poll from its checkpoint, after
        # that poll's head walk, so new history never waits behind a whole revisit. With nothing left the
        # revisit stays due, and the next poll starts it.
        left = min(deadline - time.monotonic(), settings.REVISIT_SLICE_SECONDS)
        if result.complete and left > 0 and revisit_due(source):
            revisit = revisit_retry_window(source, client=client, budget_seconds=left)
            result.pages += revisit.pages
            result.stored.add(revisit.stored)
            result.revisited = True
            result.complete = revisit.complete
    finally:
        if own_client:
            client.close()
    return result
