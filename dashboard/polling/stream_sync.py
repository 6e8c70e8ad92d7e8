"""The provider's own view of the streams, read on the poll schedule: status and status message, description,
chains (`GET /streams/evm`, and `/streams/aptos` where the host has it), and its delivered / failed counts
(`GET /stats`). Pages show them beside our estimate; the `provider_error_state` alert condition reads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from dashboard.deliveries.models import Stream
from dashboard.sources.clients import streams_client
from dashboard.sources.models import Source
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.streams import Stream as ProviderStream
from dashboard.upstream.streams import fetch_all_streams, fetch_stats

log = logging.getLogger(__name__)


@dataclass
class StreamSync:
    streams: int = 0
    # (stream id, old status, new status) for each stream whose provider status changed.
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    counted: int = 0
    errors: list[str] = field(default_factory=list)


def sync_streams(source: Source, *, client: UpstreamClient | None = None, now: datetime | None = None) -> StreamSync:
    """Read the provider's streams and stats for one source and store them on the stream rows.

    A failure of one part (stats unreachable, no Aptos streams on this host) is recorded on the source and
    leaves the other parts stored; the next poll tries again."""
    now = now or timezone.now()
    client = client or streams_client(source)
    result = StreamSync()
    listed: list[ProviderStream] = []
    try:
        listed = fetch_all_streams(client, kind="evm")
    except errors.UpstreamError as exc:
        result.errors.append(f"streams: {exc.message}")
    try:
        listed += fetch_all_streams(client, kind="aptos")
    except (errors.NotFound, errors.BadRequest):
        pass  # A host without Aptos streams.
    except errors.UpstreamError as exc:
        result.errors.append(f"Aptos streams: {exc.message}")
    if listed:
        result.streams = len(listed)
        result.changed = Stream.objects.record_provider_streams(source, listed, now)
    try:
        stats = fetch_stats(client)
    except errors.UpstreamError as exc:
        result.errors.append(f"stats: {exc.message}")
    else:
        per_stream = dict(stats.per_stream)
        missing = [s.id for s in listed if s.id not in per_stream]
        for stream_id in missing:
            try:
                per_stream[stream_id] = fetch_stats(client, stream_id).counts
            except errors.UpstreamError as exc:
                result.errors.append(f"stats of {stream_id}: {exc.message}")
                break
        result.counted = Stream.objects.record_provider_counts(source, per_stream, now)
    for stream_id, old, new in result.changed:
        log.info("source %s: stream %s is %s at the provider (was %s)", source.name, stream_id, new, old or "unknown")
    source.record_streams_sync(error="; ".join(result.errors), now=now)
    return result
