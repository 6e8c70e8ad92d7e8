"""Polling tests run with quick upstream retries and no lock left over from an earlier test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _polling_defaults(fast_upstream: None, no_stale_locks: None) -> None:
    pass
