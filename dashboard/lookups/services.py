"""Runs a lookup against a source's hosts: a short-lived cache in front, readable problems behind.

Pages are cached briefly in Redis so that paging back, reloading and sharing a link are instant and
cost no upstream quota. Cache keys are made of the source, its base URL and the query; never the key.
A page the upstream is still indexing (SYNCING) is not cached, so the refresh sees progress.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache

from dashboard.sources.clients import page_client
from dashboard.sources.defaults import ensure_default_source
from dashboard.sources.models import Source
from dashboard.upstream import errors
from dashboard.upstream.client import UpstreamClient
from dashboard.upstream.creators import CreatorsPage, fetch_nfts_by_creators
from dashboard.upstream.owners import OwnersPage, fetch_owners_page

log = logging.getLogger(__name__)

T = TypeVar("T")

APTOS_RETIRED_HINT = (
    "The provider announced the retirement of its hosted Aptos API in late 2024; if this host no longer "
    "answers, point the source's Aptos base URL at a service that still serves /nfts/creators."
)


def cache_seconds() -> int:
    return int(getattr(settings, "LOOKUPS_CACHE_SECONDS", 120))


def refresh_seconds() -> int:
    return int(getattr(settings, "LOOKUPS_SYNC_REFRESH_SECONDS", 5))


@dataclass(frozen=True)
class Problem:
    """An upstream failure as the page shows it."""

    kind: str
    title: str
    detail: str
    retry_after: int | None = None
    status_code: int | None = None


@dataclass
class Outcome:
    page: Any | None = None
    problem: Problem | None = None
    cached: bool = False


def choose_source(chosen: Source | None) -> Source | None:
    """The source picked with ?source=, else the default one, else the first enabled one."""
    if chosen is not None:
        return chosen
    default = ensure_default_source()
    if default is not None and default.enabled:
        return default
    return Source.objects.enabled().first()


def _cache_key(operation: str, source: Source, base_url: str, params: dict[str, Any]) -> str:
    material = json.dumps([operation, source.pk, base_url, params], sort_keys=True, default=str)
    return f"lookups:{operation}:{hashlib.sha256(material.encode()).hexdigest()}"


def _run(
    operation: str,
    source: Source,
    base_url: str,
    params: dict[str, Any],
    fetch: Callable[[UpstreamClient], T],
    *,
    cacheable: Callable[[T], bool],
    aptos: bool,
) -> Outcome:
    key = _cache_key(operation, source, base_url, params)
    try:
        hit = cache.get(key)
    except Exception:  # noqa: BLE001 - a Redis outage must not take the page down; just skip the cache
        log.warning("lookup cache unavailable", exc_info=True)
        hit = None
    if hit is not None:
        return Outcome(page=hit, cached=True)
    try:
        with page_client(source, base_url) as client:
            page = fetch(client)
    except errors.UpstreamError as exc:
        return Outcome(problem=describe(exc, base_url=base_url, aptos=aptos))
    if cacheable(page):
        try:
            cache.set(key, page, cache_seconds())
        except Exception:  # noqa: BLE001
            log.warning("lookup cache unavailable", exc_info=True)
    return Outcome(page=page)


def lookup_owners(
    source: Source,
    *,
    address: str,
    chain: str,
    format: str,  # noqa: A002 - the provider's parameter name
    limit: int,
    cursor: str | None,
    normalize_metadata: bool,
    media_items: bool,
) -> Outcome:
    params = {
        "address": address, "chain": chain, "format": format, "limit": limit, "cursor": cursor,
        "normalize_metadata": normalize_metadata, "media_items": media_items,
    }  # fmt: skip

    def fetch(client: UpstreamClient) -> OwnersPage:
        return fetch_owners_page(
            client, address, chain=chain, format=format,  # type: ignore[arg-type]
            limit=limit, cursor=cursor, disable_total=False,
            normalize_metadata=normalize_metadata, media_items=media_items,
        )  # fmt: skip

    return _run(
        "owners", source, source.evm_base_url, params, fetch,
        cacheable=lambda page: not page.syncing, aptos=False,
    )  # fmt: skip


def aptos_base_url(source: Source, network: str) -> str:
    return source.aptos_testnet_base_url if network == "testnet" else source.aptos_mainnet_base_url


def lookup_creators(
    source: Source, *, addresses: list[str], network: str, limit: int, cursor: str | None
) -> Outcome:
    base_url = aptos_base_url(source, network)
    params = {"addresses": addresses, "network": network, "limit": limit, "cursor": cursor}

    def fetch(client: UpstreamClient) -> CreatorsPage:
        return fetch_nfts_by_creators(client, addresses, limit=limit, cursor=cursor)

    return _run("creators", source, base_url, params, fetch, cacheable=lambda page: True, aptos=True)


def _host(base_url: str) -> str:
    try:
        return urlsplit(base_url).netloc or base_url
    except ValueError:
        return base_url


def describe(exc: errors.UpstreamError, *, base_url: str, aptos: bool) -> Problem:
    """A message an operator can act on, for every kind of upstream failure."""
    host = _host(base_url)
    status = exc.status_code
    if isinstance(exc, errors.RejectedKey):
        return Problem(
            "rejected_key",
            "The upstream rejected the API key",
            f"{host} answered 401: {exc.message.removeprefix('the upstream rejected the API key: ')}. "
            "Check MORALIS_API_KEY, or the source's key in the admin.",
            status_code=status,
        )
    if isinstance(exc, errors.RateLimited):
        wait = math.ceil(exc.retry_after) if exc.retry_after is not None else None
        when = f"retry in {wait} s" if wait is not None else "retry in a few seconds"
        return Problem(
            "rate_limited",
            f"Rate limited by the upstream — {when}",
            f"{host} answered 429: {exc.message.removeprefix('rate limited by the upstream: ')}.",
            retry_after=wait,
            status_code=status,
        )
    if isinstance(exc, errors.BadRequest):
        return Problem(
            "bad_request",
            "The upstream refused the request",
            f"{host} answered 400: {exc.message}",
            status_code=status,
        )
    if isinstance(exc, errors.InvalidRequest):
        return Problem("invalid_request", "The request was not sent", exc.message)
    if isinstance(exc, errors.Unreachable):
        detail = f"{exc.message[:1].upper()}{exc.message[1:]}."
        if aptos:
            detail = f"{detail} {APTOS_RETIRED_HINT}"
        return Problem("unreachable", f"The upstream host {host} does not answer", detail)
    if isinstance(exc, errors.NotFound):
        hint = f" {APTOS_RETIRED_HINT}" if aptos else " Check the source's base URL."
        return Problem(
            "not_found", f"{host} does not serve this operation", f"{host} answered 404: {exc.message}.{hint}",
            status_code=status,
        )  # fmt: skip
    if isinstance(exc, errors.BadResponse):
        return Problem(
            "bad_response",
            "The upstream's answer could not be read",
            f"{exc.message}. Try again in a moment.",
        )
    return Problem(
        "upstream_error",
        "The upstream failed",
        f"{exc.message[:1].upper()}{exc.message[1:]}. Try again in a moment.",
        status_code=status,
    )
