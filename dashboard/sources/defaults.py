"""The default source, made from the MORALIS_* settings; the sources a command polls.

One rule: while MORALIS_API_KEY is set, the environment owns the default source's key and base URLs. They
are applied to that source (and only to it: `is_default`) whenever a poll starts, and the admin shows them
read-only, saying which variable sets each. Sources added in the admin are theirs alone; the environment never
touches them, even one named "default". Without MORALIS_API_KEY the default source is left as it is and can
be edited like any other."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db.models import QuerySet

from dashboard.sources.models import Source

log = logging.getLogger(__name__)

DEFAULT_SOURCE_NAME = "default"
# The source's fields the environment sets, and the setting (and environment variable) that sets each.
ENVIRONMENT_VARIABLES = {
    "api_key": "MORALIS_API_KEY",
    "streams_base_url": "MORALIS_STREAMS_BASE_URL",
    "evm_base_url": "MORALIS_EVM_BASE_URL",
    "aptos_mainnet_base_url": "MORALIS_APTOS_MAINNET_BASE_URL",
    "aptos_testnet_base_url": "MORALIS_APTOS_TESTNET_BASE_URL",
}


def managed_by_environment(source: Source) -> bool:
    """Whether the environment owns this source's key and base URLs (so the admin must not change them)."""
    return source.is_default and bool(settings.MORALIS_API_KEY)


def ensure_default_source() -> Source | None:
    """Create or update the source described by the MORALIS_* settings; None when no key is set."""
    if not settings.MORALIS_API_KEY:
        return Source.objects.filter(is_default=True).first()
    urls = {name: getattr(settings, setting) for name, setting in ENVIRONMENT_VARIABLES.items() if name != "api_key"}
    source = Source.objects.filter(is_default=True).first()
    if source is None:
        # Workers and beats starting together all get here. ON CONFLICT DO NOTHING cannot fail on the unique
        # name, so no statement that carries the (encrypted) key ever fails into the database server's log.
        Source.objects.bulk_create(
            [Source(name=DEFAULT_SOURCE_NAME, is_default=True, api_key=settings.MORALIS_API_KEY, **urls)],
            ignore_conflicts=True,
        )
        # Only the environment's own row: a source of that name added in the admin is not taken over.
        source = Source.objects.filter(is_default=True).first()
        if source is None:
            log.error(
                "MORALIS_API_KEY is set, but a source named “%s” was added in the admin; rename that source "
                "so the environment's own can be made",
                DEFAULT_SOURCE_NAME,
            )
            return None
    changed = [name for name, value in urls.items() if getattr(source, name) != value]
    for name in changed:
        setattr(source, name, urls[name])
    changed += source.set_api_key(settings.MORALIS_API_KEY)
    if changed:
        source.save(update_fields=changed)
    return source


class NoSource(LookupError):
    """No enabled source to read (or none of that name); the message tells the operator what to do."""


def sources_to_poll(name: str | None = None) -> QuerySet[Source]:
    """The enabled sources (after making the default one from MORALIS_*), or only the one named."""
    ensure_default_source()
    sources = Source.objects.enabled()
    if name:
        sources = sources.filter(name=name)
    if not sources.exists():
        raise NoSource(
            f"No enabled source named “{name}”." if name
            else "No enabled source: set MORALIS_API_KEY or add a source in the admin."
        )
    return sources
