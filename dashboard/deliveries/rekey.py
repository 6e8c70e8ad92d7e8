"""Deriving the search keys of stored deliveries again, after the key extraction learned something new
(decoded events and their addresses): the ingest writes keys only for records it stores or that change.
The rollups of the hours whose rows changed keys are recomputed with them (the event rollup reads the keys)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection, transaction

from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.deliveries.payload_keys import search_keys
from dashboard.deliveries.rollup_upkeep import refresh_rollups
from dashboard.deliveries.write_lock import take_write_lock


@dataclass(frozen=True)
class Batch:
    read: int
    changed: int
    last_id: uuid.UUID


def refresh_search_keys(*, batch_size: int = 500, after: uuid.UUID | None = None) -> Iterator[Batch]:
    """Walk the deliveries in id order, one batch per transaction, and rewrite the keys that differ from
    what the payload gives now. Each batch is read under the write lock, so a poll storing a newer copy
    of a record at the same moment waits and its keys are never overwritten with stale ones."""
    last = after
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            take_write_lock(cursor)
            rows = Delivery.objects.order_by("id").only(
                "id", "payload", "block_number", "search_keys", "source_id", "stream_id", "date"
            )
            if last is not None:
                rows = rows.filter(id__gt=last)
            batch = list(rows[:batch_size])
            if not batch:
                return
            changed = []
            for delivery in batch:
                payload = delivery.payload if isinstance(delivery.payload, dict) else None
                keys = search_keys(payload, delivery.block_number)
                if keys != sorted(delivery.search_keys):
                    delivery.search_keys = keys
                    changed.append(delivery)
            Delivery.objects.bulk_update(changed, ["search_keys"])
            # The event rollups count deliveries by their event keys: the hours of changed rows are
            # recomputed, as ingest does for the rows it writes.
            refresh_rollups(cursor, {(d.source_id, d.stream_id, HourlyRollup.hour_of(d.date)) for d in changed})
        last = batch[-1].id
        yield Batch(len(batch), len(changed), last)
