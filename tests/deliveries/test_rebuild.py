"""Generated rows come with the rollups, stream rows and error-group counts ingest would have written, and
`rebuild_derived` recomputes them from the rows whatever state they were left in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from dashboard.deliveries.models import Delivery, ErrorGroup, HourlyRollup, Stream
from dashboard.devtools.generator import generate_deliveries
from tests.checks import assert_derived_exact

pytestmark = pytest.mark.django_db(transaction=True)

NEWEST = datetime(2026, 3, 2, 12, 34, tzinfo=UTC)


def test_generated_rows_come_with_exact_derived_data() -> None:
    generate_deliveries(3000, days=3, newest=NEWEST, failure_rate=0.1, hostile=True, analyze=False)

    assert HourlyRollup.objects.count() > 0
    assert_derived_exact()


def test_a_heavy_day_and_a_long_history_are_shapes_of_the_same_rows() -> None:
    generate_deliveries(2000, seed="history", days=90, newest=NEWEST, analyze=False)
    generate_deliveries(2000, seed="day", days=1, newest=NEWEST, analyze=False)

    day = Delivery.objects.filter(date__gte=NEWEST - timedelta(days=1))
    assert day.filter(source__name="generated-day").count() == 2000
    assert day.filter(source__name="generated-history").count() in range(15, 30)
    assert_derived_exact()


def test_the_command_repairs_what_was_lost_and_keeps_rollups_of_deleted_hours(
    capsys: pytest.CaptureFixture[str],
) -> None:
    generated = generate_deliveries(1500, days=2, newest=NEWEST, failure_rate=0.2, analyze=False)
    # Rollups of an hour whose deliveries retention deleted stay.
    kept = HourlyRollup.objects.create(
        source=generated.source, hour=NEWEST - timedelta(days=200), stream_id=generated.stream_ids[0],
        tag="old", webhook_url="https://old.example.com", status="delivered", retries=0, deliveries=9,
    )
    # Damage: rollups lost and wrong, a stream's dates and URLs wrong, a group's count wrong.
    HourlyRollup.objects.filter(hour__gte=NEWEST - timedelta(hours=10)).delete()
    HourlyRollup.objects.filter(hour__lt=NEWEST - timedelta(hours=30), deliveries__gt=0).update(deliveries=1)
    Stream.objects.filter(stream_id=generated.stream_ids[1]).update(webhook_urls=[], last_delivery_at=None)
    ErrorGroup.objects.update(delivery_count=0)

    call_command("rebuild_derived", "--source", generated.source.name)

    assert "streams in" in capsys.readouterr().out
    assert HourlyRollup.objects.filter(pk=kept.pk).exists()
    kept.delete()
    assert_derived_exact()
