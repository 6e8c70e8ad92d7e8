"""Retention deletes old deliveries in bounded batches, keeps counts exact and rollups longer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup, PeriodRollup
from dashboard.deliveries.retention import enforce_retention
from tests.deliveries.test_ingest import make_source_row, record

pytestmark = pytest.mark.django_db


def test_it_deletes_old_deliveries_in_batches_and_keeps_rollups(settings: object) -> None:
    settings.HISTORY_RETENTION_DAYS = 90  # type: ignore[attr-defined]
    settings.ROLLUP_RETENTION_DAYS = 400  # type: ignore[attr-defined]
    source = make_source_row()
    records = [record(i, error="socket hang up" if i % 2 else "", minutes=i) for i in range(1, 26)]
    store_records(source, records)
    rollup_rows = HourlyRollup.objects.count()
    # "Now" is 90 days after the 13th record: records 1..12 are older than retention.
    first = Delivery.objects.order_by("date")[12].date
    now = first + timedelta(days=90)

    result = enforce_retention(now=now, batch_size=5)

    assert result.deliveries_deleted == 12
    assert result.batches >= 3
    assert Delivery.objects.count() == 13
    group = ErrorGroup.objects.get()
    assert group.delivery_count == Delivery.objects.exclude(error_message="").count()
    assert group.first_seen == Delivery.objects.exclude(error_message="").order_by("date")[0].date
    assert HourlyRollup.objects.count() == rollup_rows, "rollups outlive the deliveries"
    assert PeriodRollup.objects.count() > 0

    enforce_retention(now=now + timedelta(days=400))
    assert Delivery.objects.count() == 0
    assert HourlyRollup.objects.count() == 0
    assert PeriodRollup.objects.count() == 0
    assert ErrorGroup.objects.get().delivery_count == 0


def test_nothing_recent_is_touched() -> None:
    source = make_source_row()
    store_records(source, [record(1, date=(timezone.now() - timedelta(days=89)).isoformat())])
    result = enforce_retention(now=timezone.now())
    assert result.deliveries_deleted == 0
    assert Delivery.objects.count() == 1


def test_rows_sharing_a_date_across_batches_all_go() -> None:
    """Each batch resumes at the newest date the last one deleted; rows of that date it left still go."""
    source = make_source_row()
    same = (timezone.now() - timedelta(days=95)).isoformat()
    records = [record(i, date=same) for i in range(1, 8)]
    records += [record(i, date=(timezone.now() - timedelta(days=96, minutes=i)).isoformat()) for i in range(8, 14)]
    records.append(record(20, date=(timezone.now() - timedelta(days=1)).isoformat()))
    store_records(source, records)

    result = enforce_retention(now=timezone.now(), batch_size=4)

    assert result.deliveries_deleted == 13
    assert Delivery.objects.count() == 1
    assert Delivery.objects.get().date > timezone.now() - timedelta(days=2)
