"""An interrupted generation finishes with `--from-row` and the first run's `--newest`: the same rows, dates
and derived data as one uninterrupted run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.deliveries.models import Delivery
from tests.checks import assert_derived_exact

pytestmark = pytest.mark.django_db(transaction=True)

NEWEST = "2026-03-02T12:34:56+00:00"


def test_a_run_resumed_from_a_row_gives_the_rows_of_one_run() -> None:
    args = ["--count", "400", "--days", "2", "--seed", "resume", "--newest", NEWEST]
    call_command("generate_deliveries", *args, "--from-row", "251")
    assert Delivery.objects.count() == 150
    call_command("generate_deliveries", *args)

    dates = sorted(Delivery.objects.values_list("date", flat=True), reverse=True)
    assert len(dates) == 400
    step = timedelta(days=2) / 400
    newest = dates[0] + step
    assert newest.isoformat() == NEWEST
    assert all(abs(date - (newest - (n + 1) * step)) < timedelta(milliseconds=1) for n, date in enumerate(dates))
    assert_derived_exact()


def test_a_newest_date_without_an_offset_is_refused() -> None:
    with pytest.raises(CommandError, match="UTC offset"):
        call_command("generate_deliveries", "--count", "10", "--newest", "2026-03-02T12:34:56")
