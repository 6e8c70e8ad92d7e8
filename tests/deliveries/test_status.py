"""A delivery's status from its error message and retries."""

from __future__ import annotations

from dashboard.deliveries.status import delivery_status


def test_status_follows_error_and_retries() -> None:
    assert delivery_status("", 3) == "delivered"
    assert delivery_status("socket hang up", 2) == "retrying"
    assert delivery_status("socket hang up", 7) == "failed"
