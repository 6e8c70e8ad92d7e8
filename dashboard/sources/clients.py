"""The one place upstream clients are built for a source, with the UPSTREAM_* settings.

Three kinds of caller want three retry policies from the same settings: the poller (full retries, a
worker is waiting), a page (someone is waiting: fewer, shorter retries) and the admin's connection test
(one request, no retry, so the answer says exactly what the key got).
"""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from dashboard.sources.models import Source
from dashboard.upstream.client import ClientSettings, UpstreamClient
from dashboard.upstream.factory import UpstreamClients, clients_for_source


def poller_settings(api_key: str) -> ClientSettings:
    """The UPSTREAM_* timeouts and retry count."""
    return ClientSettings(
        api_key=api_key,
        connect_timeout=float(settings.UPSTREAM_CONNECT_TIMEOUT),
        read_timeout=float(settings.UPSTREAM_READ_TIMEOUT),
        max_retries=int(settings.UPSTREAM_MAX_RETRIES),
    )


def page_settings(api_key: str) -> ClientSettings:
    """The poller's settings with fewer, shorter retries: someone is waiting for this page."""
    base = poller_settings(api_key)
    return replace(
        base,
        max_retries=min(base.max_retries, 1),
        max_retry_after=2.0,
        backoff_cap=1.0,
        total_timeout=min(base.total_timeout, base.read_timeout + base.connect_timeout),
    )


def probe_settings(api_key: str) -> ClientSettings:
    """One request, no retries, short timeouts: a connection test reports what happened, not a retry's outcome."""
    base = poller_settings(api_key)
    return replace(
        base,
        connect_timeout=min(base.connect_timeout, 5.0),
        read_timeout=min(base.read_timeout, 10.0),
        max_retries=0,
        total_timeout=20.0,
    )


def _labelled(settings: ClientSettings, source: Source) -> ClientSettings:
    """The settings with the source's name as the label of its request metrics."""
    return replace(settings, metrics_source=source.name)


def streams_client(source: Source) -> UpstreamClient:
    """The poller's client for the source's Streams host (history and the stream operations)."""
    return UpstreamClient(source.streams_base_url, _labelled(poller_settings(source.api_key), source))


def scan_client(source: Source) -> UpstreamClient:
    """The poller's client for a block scan's previews, except that a 429 naming its Retry-After is not waited
    out in the worker: it is raised at once, and the scan comes back after that long (actions/block_scan.py)."""
    return UpstreamClient(
        source.streams_base_url, _labelled(replace(poller_settings(source.api_key), max_retry_after=0.0), source)
    )


def page_client(source: Source, base_url: str) -> UpstreamClient:
    """A client for one of the source's hosts, for a page someone is waiting on."""
    return UpstreamClient(base_url, _labelled(page_settings(source.api_key), source))


def probe_client(source: Source) -> UpstreamClient:
    return UpstreamClient(source.streams_base_url, _labelled(probe_settings(source.api_key), source))


def all_clients(source: Source) -> UpstreamClients:
    """One poller-settings client per host of the source."""
    return clients_for_source(source, _labelled(poller_settings(source.api_key), source))
