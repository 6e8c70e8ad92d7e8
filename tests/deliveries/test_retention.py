"""Retention removes expired deliveries and keeps rollups longer (partition by partition: test_partitions.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.deliveries.ingest import store_records
from dashboard.deliveries.models import (
    Delivery,
    ErrorGroup,
    ErrorMessage,
    HourlyRollup,
    PeriodRollup,
    StreamPeriodRollup,
)
from dashboard.deliveries.retention import enforce_retention
from tests.deliveries.test_ingest import make_source_row, record

pytestmark = pytest.mark.django_db


def test_expired_deliveries_go_and_rollups_stay_longer(settings: object) -> None:
    settings.HISTORY_RETENTION_DAYS = 90  # type: ignore[attr-defined]
    settings.ROLLUP_RETENTION_DAYS = 400  # type: ignore[attr-defined]
    source = make_source_row()
    records = [record(i, error="socket hang up" if i % 2 else "", minutes=i) for i in range(1, 26)]
    store_records(source, records)
    rollup_rows = HourlyRollup.objects.count()
    # A week after the records' whole week has passed the 90 days.
    now = Delivery.objects.order_by("-date")[0].date + timedelta(days=98)

    result = enforce_retention(now=now)

    assert result.deliveries_deleted == 25
    assert Delivery.objects.count() == 0
    assert ErrorGroup.objects.get().delivery_count == 0
    assert ErrorMessage.objects.count() == 0, "no stored delivery carries the message any more"
    assert HourlyRollup.objects.count() == rollup_rows, "rollups outlive the deliveries"
    assert PeriodRollup.objects.count() > 0
    assert StreamPeriodRollup.objects.count() > 0

    enforce_retention(now=now + timedelta(days=400))
    assert HourlyRollup.objects.count() == 0
    assert PeriodRollup.objects.count() == 0
    assert StreamPeriodRollup.objects.count() == 0


def test_nothing_recent_is_touched() -> None:
    source = make_source_row()
    store_records(source, [record(1, date=(timezone.now() - timedelta(days=89)).isoformat())])
    result = enforce_retention(now=timezone.now())
    assert result.deliveries_deleted == 0
    assert Delivery.objects.count() == 1


def test_an_error_message_goes_once_no_stored_delivery_can_carry_it(settings: object) -> None:
    settings.HISTORY_RETENTION_DAYS = 90  # type: ignore[attr-defined]
    source = make_source_row()
    old_week = timezone.now() - timedelta(days=120)
    store_records(source, [
        record(1, date=old_week.isoformat(), error="connect ECONNREFUSED 10.0.0.1:443"),
        record(2, date=old_week.isoformat(), error="connect ECONNREFUSED 10.0.0.2:443"),
        # Seen again lately: its last_seen moves forward and it stays.
        record(3, date=(timezone.now() - timedelta(days=1)).isoformat(), error="connect ECONNREFUSED 10.0.0.2:443"),
    ])
    assert ErrorMessage.objects.count() == 2

    result = enforce_retention(now=timezone.now())

    assert result.deliveries_deleted == 2 and result.messages_deleted == 1
    assert list(ErrorMessage.objects.values_list("message", flat=True)) == ["connect ECONNREFUSED 10.0.0.2:443"]
