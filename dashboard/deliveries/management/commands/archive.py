"""`manage.py archive export|verify|list|search|restore|release`: the cold history in ARCHIVE_URL (see
`deliveries/archive.py` and the README's "Cold history (archive)")."""

from __future__ import annotations

import time
from datetime import UTC, date, timedelta
from typing import Any

import pyarrow as pa
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from dashboard.deliveries import archive
from dashboard.deliveries.search import SearchError, parse_search


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a day (YYYY-MM-DD).") from None


def _days(first: str, last: str | None) -> list[date]:
    start = _day(first)
    end = _day(last) if last else start
    if end < start:
        raise CommandError(f"The last day ({end}) is before the first ({start}).")
    if (end - start).days > 3660:
        raise CommandError("At most ten years of days at once.")
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


class Command(BaseCommand):
    help = (
        "The archive of expired deliveries (ARCHIVE_URL): export and verify days, list them, search them for a "
        "hash, an address, a block or an event, restore a day into the database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        export = actions.add_parser("export", help="Export days (verified; a day already archived is kept).")
        export.add_argument("first", help="First day, YYYY-MM-DD (UTC).")
        export.add_argument("last", nargs="?", help="Last day (default: the first).")
        verify = actions.add_parser("verify", help="Re-read days' files and compare them with the database.")
        verify.add_argument("first")
        verify.add_argument("last", nargs="?")
        actions.add_parser("list", help="The archived days: rows, files, bytes, hold.")
        search = actions.add_parser("search", help="Find deliveries in the archive by a search key (timed).")
        search.add_argument("term", help="A tx hash, an address, a block number or event:Name, as in the search box.")
        search.add_argument("--from", dest="first", help="First day to read (default: the oldest archived).")
        search.add_argument("--to", dest="last", help="Last day to read (default: the newest archived).")
        search.add_argument("--limit", type=int, default=100, help="Stop after this many matches (default 100).")
        restore = actions.add_parser("restore", help="Put an archived day back into the database.")
        restore.add_argument("day")
        restore.add_argument(
            "--keep-days", type=int, default=7,
            help="Retention leaves the restored day alone this many days (default 7; 0: the next run may delete it).",
        )
        release = actions.add_parser("release", help="End a restored day's hold: retention may delete it again.")
        release.add_argument("day")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            store = archive.open_store()
            getattr(self, f"_{action}")(store, **options)
        except archive.ArchiveError as error:
            raise CommandError(str(error)) from None
        except (OSError, pa.ArrowException) as error:
            raise CommandError(f"The archive cannot be read or written: {error}") from None

    def _export(self, store: archive.Store, *, first: str, last: str | None, **_: Any) -> None:
        started = time.monotonic()
        rows = size = 0
        for day in _days(first, last):
            done = archive.export_day(store, day)
            rows += done.rows if done.outcome == "exported" else 0
            size += done.bytes
            self.stdout.write(f"{day}: {done.outcome}, {done.rows:,} rows, {done.bytes:,} bytes, {done.seconds:.1f} s")
        seconds = time.monotonic() - started
        rate = f" ({rows / seconds:,.0f} rows/s)" if rows and seconds else ""
        self.stdout.write(f"Exported {rows:,} rows, {size:,} bytes, to {store.shown} in {seconds:.1f} s{rate}.")

    def _verify(self, store: archive.Store, *, first: str, last: str | None, **_: Any) -> None:
        failed = []
        started = time.monotonic()
        for day in _days(first, last):
            verdict = archive.verify_day(store, day)
            if verdict.ok:
                self.stdout.write(f"{day}: verified, {verdict.rows:,} rows")
            else:
                self.stdout.write(f"{day}: NOT verified: {verdict.problem}")
                failed.append(day)
        if failed:
            raise CommandError(f"{len(failed)} day(s) not verified: {', '.join(map(str, failed))}.")
        self.stdout.write(f"Verified in {time.monotonic() - started:.1f} s.")

    def _list(self, store: archive.Store, **_: Any) -> None:
        days = archive.archived_days(store)
        for day in days:
            manifest = archive.read_manifest(store, day) or {}
            size = sum(int(f["bytes"]) for f in manifest.get("files", []))
            held = archive.hold_until(store, day)
            hold = f", held until {held:%Y-%m-%d %H:%M} UTC" if held and held > timezone.now() else ""
            self.stdout.write(f"{day}: {manifest.get('rows', 0):,} rows, {len(manifest.get('files', []))} files, {size:,} bytes{hold}")
        self.stdout.write(f"{len(days)} days archived in {store.shown}.")

    def _search(
        self, store: archive.Store, *, term: str, first: str | None, last: str | None, limit: int, **_: Any
    ) -> None:
        try:
            parsed = parse_search(term)
        except SearchError as error:
            raise CommandError(str(error)) from None
        if limit < 1:
            raise CommandError("--limit must be at least 1.")
        found = archive.search(
            store, parsed.keys, _day(first) if first else None, _day(last) if last else None, limit=limit
        )
        for row in found.matches:
            moment = row["date"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            rest = "  ".join(f"{k}={row[k]}" for k in row if k not in ("id", "date"))
            self.stdout.write(f"{row['id']}  {moment}  {rest}")
        self.stdout.write(
            f"{len(found.matches)} deliveries found for {parsed.label} in {found.seconds:.2f} s "
            f"({found.days} archived days, {found.rows:,} rows' keys read)."
        )

    def _restore(self, store: archive.Store, *, day: str, keep_days: int, **_: Any) -> None:
        if keep_days < 0:
            raise CommandError("--keep-days must be 0 or more.")
        restored_day = _day(day)
        until = timezone.now() + timedelta(days=keep_days) if keep_days else None
        # The hold first: a retention run meanwhile must not delete what is being put back.
        archive.set_hold(store, restored_day, until)
        try:
            restored = archive.restore_day(store, restored_day)
        except DatabaseError as error:
            raise CommandError(f"{restored_day} not restored: {error}".strip()) from None
        held = f"; retention keeps it until {until:%Y-%m-%d %H:%M} UTC" if until else ""
        self.stdout.write(
            f"{restored.day}: {restored.inserted:,} of {restored.archived:,} archived deliveries inserted "
            f"(the others were stored already), derived data rebuilt, in {restored.seconds:.1f} s{held}."
        )

    def _release(self, store: archive.Store, *, day: str, **_: Any) -> None:
        released = _day(day)
        archive.set_hold(store, released, None)
        self.stdout.write(f"{released}: no longer held; the next retention run may delete it (its archive stays).")
