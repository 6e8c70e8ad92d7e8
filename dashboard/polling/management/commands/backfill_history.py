from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from dashboard.deliveries.ingest import StoreResult
from dashboard.locks import exclusive
from dashboard.polling.jobs import source_lock_name
from dashboard.polling.models import HistoryWalk, WalkKind
from dashboard.polling.walks import mark_synced, walk_history
from dashboard.sources.clients import streams_client
from dashboard.sources.defaults import NoSource, sources_to_poll
from dashboard.sources.models import Source
from dashboard.times import iso_minutes
from dashboard.upstream.errors import UpstreamError
from dashboard.upstream.history import HistoryPage


class Command(BaseCommand):
    help = (
        "Walk the whole upstream delivery history of every enabled source into the database, with a "
        "progress bar. The position is checkpointed after every page: after Ctrl-C or a kill, run it "
        "again to continue where it stopped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--source", help="Only this source (by name).")
        parser.add_argument(
            "--restart", action="store_true", help="Forget the checkpoint and walk again from the newest page."
        )
        parser.add_argument(
            "--wait", type=float, default=300.0, help="Seconds to wait for a running poll of a source (default 300)."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar (for logs).")

    def handle(
        self, *args: Any, source: str | None = None, restart: bool = False, wait: float = 300.0,
        no_progress: bool = False, **options: Any,
    ) -> None:
        try:
            sources = sources_to_poll(source)
        except NoSource as exc:
            raise CommandError(str(exc)) from exc
        try:
            for item in sources:
                self._backfill(item, restart=restart, wait=wait, progress=not no_progress)
        except KeyboardInterrupt:
            self.stderr.write("\ninterrupted; run the command again to resume where it stopped")
            raise SystemExit(130) from None

    def _backfill(self, source: Source, *, restart: bool, wait: float, progress: bool) -> None:
        checkpoint = HistoryWalk.objects.filter(source=source, kind=WalkKind.BACKFILL).first()
        if checkpoint is not None and checkpoint.finished and not restart:
            self.stdout.write(
                f"{source.name}: backfill already complete ({checkpoint.records} records, finished "
                f"{iso_minutes(checkpoint.finished_at)}); --restart walks the history again"
            )
            return
        resuming = checkpoint is not None and not checkpoint.finished and not restart
        def waiting() -> None:
            self.stdout.write(f"{source.name}: a poll of this source is running; waiting up to {wait:.0f} s for it")

        with exclusive(source_lock_name(source.pk), wait=wait, on_wait=waiting) as held:
            if held is None:
                raise CommandError(f"{source.name}: a poll is still running after {wait:.0f} s; try again")
            if resuming and checkpoint is not None:
                self.stdout.write(
                    f"{source.name}: resuming after page {checkpoint.pages} ({checkpoint.records} records stored)"
                )
            bar = tqdm(
                total=checkpoint.upstream_total if resuming and checkpoint else None,
                initial=checkpoint.records if resuming and checkpoint else 0,
                unit=" records", desc=source.name, disable=not progress, dynamic_ncols=True, smoothing=0.1,
            )
            totals = StoreResult()

            def on_page(walk: HistoryWalk, page: HistoryPage, stored: StoreResult) -> None:
                if not held.keep():
                    raise CommandError(f"{source.name}: lost the poll lock (Redis unreachable?); run again to resume")
                totals.add(stored)
                if walk.upstream_total is not None:
                    # The upstream's total moves as records arrive and expire; the bar's ETA follows it.
                    bar.total = max(walk.upstream_total, walk.records)
                bar.update(len(page.records))
                bar.set_postfix(new=totals.inserted, updated=totals.updated, refresh=False)

            client = streams_client(source)
            try:
                outcome = walk_history(
                    source, WalkKind.BACKFILL, client=client, stop_before=None, restart=restart, on_page=on_page
                )
            except KeyboardInterrupt:
                bar.close()
                raise
            except UpstreamError as exc:
                bar.close()
                raise CommandError(f"{source.name}: {exc.message}; run the command again to resume") from None
            finally:
                client.close()
            bar.close()
            mark_synced(source, outcome.walk)
        self.stdout.write(
            f"{source.name}: backfill complete, {outcome.walk.records} records in {outcome.walk.pages} pages "
            f"({totals.inserted} new, {totals.updated} updated, {totals.unchanged} unchanged, "
            f"{len(totals.rejected)} rejected)"
        )
