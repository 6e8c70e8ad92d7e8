"""The upstream sources the poller reads, and the default one made from the environment."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from dashboard.deliveries.models import Source
from dashboard.upstream.client import ClientSettings, UpstreamClient

DEFAULT_SOURCE_NAME = "default"


def ensure_default_source() -> Source | None:
    """Create or update the source described by the MORALIS_* settings; None when no key is set."""
    if not settings.MORALIS_API_KEY:
        return Source.objects.filter(is_default=True).first()
    fields = {
        "api_key": settings.MORALIS_API_KEY,
        "streams_base_url": settings.MORALIS_STREAMS_BASE_URL,
        "evm_base_url": settings.MORALIS_EVM_BASE_URL,
        "aptos_mainnet_base_url": settings.MORALIS_APTOS_MAINNET_BASE_URL,
        "aptos_testnet_base_url": settings.MORALIS_APTOS_TESTNET_BASE_URL,
    }
    source = Source.objects.filter(is_default=True).first()
    if source is None:
        return Source.objects.create(name=DEFAULT_SOURCE_NAME, is_default=True, **fields)
    changed = [name for name, value in fields.items() if getattr(source, name) != value]
    if changed:
        for name in changed:
            setattr(source, name, fields[name])
        if "api_key" in changed:
            # A new key deserves a fresh try at once.
            source.key_rejected_at = None
            source.backoff_until = None
            changed += ["key_rejected_at", "backoff_until"]
        source.save(update_fields=changed)
    return source


def enabled_sources() -> QuerySet[Source]:
    return Source.objects.filter(enabled=True)


def client_settings(api_key: str) -> ClientSettings:
    return ClientSettings(
        api_key=api_key,
        connect_timeout=float(settings.UPSTREAM_CONNECT_TIMEOUT),
        read_timeout=float(settings.UPSTREAM_READ_TIMEOUT),
        max_retries=settings.UPSTREAM_MAX_RETRIES,
    )


def streams_client(source: Source) -> UpstreamClient:
    return UpstreamClient(source.streams_base_url, client_settings(source.api_key))
