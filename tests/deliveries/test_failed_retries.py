"""A retry that failed again is counted apart from new failures: a new failed attempt the alerts look at."""

from __future__ import annotations

import pytest

from dashboard.deliveries.ingest import store_records
from tests.deliveries.test_ingest import make_source_row, record

pytestmark = pytest.mark.django_db


def test_a_retry_failing_again_is_a_failed_retry_not_a_new_failure() -> None:
    source = make_source_row()
    first = store_records(source, [record(1, error="socket hang up"), record(2, error="socket hang up", minutes=5),
                                   record(3, minutes=9)])
    assert (first.new_failures, first.failed_retries) == (2, 0)
    # Record 1's retry failed again, record 2 is unchanged, record 3 starts failing.
    again = store_records(source, [record(1, error="timeout of 10000ms exceeded", retries=1),
                                   record(2, error="socket hang up", minutes=5),
                                   record(3, error="socket hang up", retries=1, minutes=9)])
    assert (again.new_failures, again.failed_retries) == (1, 1)
    # Delivered at last: neither.
    done = store_records(source, [record(1, retries=2)])
    assert (done.new_failures, done.failed_retries) == (0, 0)
