"""The default source, made from the MORALIS_* settings."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from dashboard.sources.models import Source

DEFAULT_SOURCE_NAME = "default"


def ensure_default_source() -> Source | None:
    """Create or update the source described by the MORALIS_* settings; None when no key is set."""
    if not settings.MORALIS_API_KEY:
        return Source.objects.filter(is_default=True).first()
    urls = {
        "streams_base_url": settings.MORALIS_STREAMS_BASE_URL,
        "evm_base_url": settings.MORALIS_EVM_BASE_URL,
        "aptos_mainnet_base_url": settings.MORALIS_APTOS_MAINNET_BASE_URL,
        "aptos_testnet_base_url": settings.MORALIS_APTOS_TESTNET_BASE_URL,
    }
    source = Source.objects.filter(is_default=True).first()
    if source is None:
        # Workers and beats starting together all get here. ON CONFLICT DO NOTHING cannot fail on the unique
        # name, so no statement that carries the (encrypted) key ever fails into the database server's log.
        Source.objects.bulk_create(
            [Source(name=DEFAULT_SOURCE_NAME, is_default=True, api_key=settings.MORALIS_API_KEY, **urls)],
            ignore_conflicts=True,
        )
        source = Source.objects.filter(name=DEFAULT_SOURCE_NAME).first()
        if source is None:
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
