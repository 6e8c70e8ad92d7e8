"""The lock every writer of deliveries and their derived tables holds for the rest of its transaction, so
concurrent batches (two pollers, a backfill, retention) never interleave their updates of error-group
counts and rollups: those stay exact."""

from __future__ import annotations

from typing import Any

INGEST_LOCK_KEY = 4_170_031_001


def take_write_lock(cursor: Any) -> None:
    """Wait for and hold the write lock until the current transaction ends."""
    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [INGEST_LOCK_KEY])
