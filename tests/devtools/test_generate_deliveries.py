"""`generate_deliveries` shapes a heavy day now and a day in the past (for retention) in the same source and
streams, with the derived data ingest would have written; an interrupted generation finishes with
`--from-row` and the first run's `--newest`: the same rows, dates and derived data as one uninterrupted run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.deliveries.models import Delivery, Stream
from dashboard.deliveries.retention import enforce_retention
from dashboard.devtools.generator import delivery_id, generate_deliveries, row_seed, stream_id, tx_hash
from tests.checks import assert_derived_exact

pytestmark = pytest.mark.django_db(transaction=True)

NEWEST = datetime(2026, 3, 2, 12, 34, tzinfo=UTC)


def test_a_span_in_the_past_has_rows_of_its_own_in_the_same_source_and_streams() -> None:
    recent = generate_deliveries(800, seed="day", days=1, newest=NEWEST, analyze=False)
    old = generate_deliveries(800, seed="day", days=1, newest=NEWEST, ends_days_ago=90.05, analyze=False)

    assert old.source == recent.source and old.stream_ids == recent.stream_ids
    assert Delivery.objects.count() == 1600
    old_end = NEWEST - timedelta(days=90.05)
    assert Delivery.objects.filter(date__gte=NEWEST - timedelta(days=1), date__lt=NEWEST).count() == 800
    assert Delivery.objects.filter(date__gte=old_end - timedelta(days=1), date__lt=old_end).count() == 800
    # Ids and transaction hashes of the old span are its own; a search finds one row, not one of each day.
    old_row = Delivery.objects.get(id=delivery_id(row_seed("day", 90.05), 7))
    assert old_end - timedelta(days=1) <= old_row.date < old_end
    assert f"tx:{tx_hash(row_seed('day', 90.05), 7, 1)}" in old_row.search_keys
    assert f"tx:{tx_hash('day', 7, 1)}" in Delivery.objects.get(id=delivery_id("day", 7)).search_keys
    assert Delivery.objects.filter(search_keys__contains=[f"tx:{tx_hash('day', 7, 1)}"]).count() == 1
    stream = Stream.objects.get(stream_id=stream_id("day", 0))
    assert stream.first_delivery_at is not None and stream.first_delivery_at < old_end
    assert_derived_exact()


def test_the_command_places_a_day_that_retention_deletes_whole(
    settings: object, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.HISTORY_RETENTION_DAYS = 90  # type: ignore[attr-defined]
    call_command("generate_deliveries", "--count", "600", "--days", "1", "--seed", "day")
    # A day whose whole week partition is past the 90 days, whatever the weekday today.
    call_command("generate_deliveries", "--count", "600", "--days", "1", "--seed", "day", "--ends-days-ago", "98.05")
    # A rerun of the same command skips the ids it already wrote.
    call_command("generate_deliveries", "--count", "600", "--days", "1", "--seed", "day", "--ends-days-ago", "98.05")

    assert "Generated 600 deliveries for source 'generated-day'" in capsys.readouterr().out
    assert Delivery.objects.count() == 1200
    assert Delivery.objects.filter(date__lt=timezone.now() - timedelta(days=90)).count() == 600

    result = enforce_retention(batch_size=250)

    assert result.deliveries_deleted == 600 and result.partitions_dropped
    assert Delivery.objects.count() == 600
    assert not Delivery.objects.filter(date__lt=timezone.now() - timedelta(days=1, minutes=1)).exists()


def test_a_span_cannot_end_in_the_future() -> None:
    with pytest.raises(CommandError, match="--ends-days-ago must not be negative"):
        call_command("generate_deliveries", "--count", "10", "--ends-days-ago", "-1")
    with pytest.raises(ValueError, match="ends_days_ago"):
        generate_deliveries(10, ends_days_ago=-0.5)


NEWEST_ISO = "2026-03-02T12:34:56+00:00"


def test_a_run_resumed_from_a_row_gives_the_rows_of_one_run() -> None:
    args = ["--count", "400", "--days", "2", "--seed", "resume", "--newest", NEWEST_ISO]
    call_command("generate_deliveries", *args, "--from-row", "251")
    assert Delivery.objects.count() == 150
    call_command("generate_deliveries", *args)

    dates = sorted(Delivery.objects.values_list("date", flat=True), reverse=True)
    assert len(dates) == 400
    step = timedelta(days=2) / 400
    newest = dates[0] + step
    assert newest.isoformat() == NEWEST_ISO
    assert all(abs(date - (newest - (n + 1) * step)) < timedelta(milliseconds=1) for n, date in enumerate(dates))
    assert_derived_exact()


def test_a_newest_date_without_an_offset_is_refused() -> None:
    with pytest.raises(CommandError, match="UTC offset"):
        call_command("generate_deliveries", "--count", "10", "--newest", "2026-03-02T12:34:56")
