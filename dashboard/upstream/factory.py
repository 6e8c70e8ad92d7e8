"""Building the four upstream clients from a Source row or from the MORALIS_* settings.

The only module of this package that reads Django settings, and only when asked to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from dashboard.upstream.client import ClientSettings, UpstreamClient


class SourceLike(Protocol):
    api_key: str
    streams_base_url: str
    evm_base_url: str
    aptos_mainnet_base_url: str
    aptos_testnet_base_url: str


@dataclass
class UpstreamClients:
    """One client per host; close them (or use `with`) to release their connections."""

    history: UpstreamClient
    evm: UpstreamClient
    aptos_mainnet: UpstreamClient
    aptos_testnet: UpstreamClient

    def aptos(self, network: str) -> UpstreamClient:
        if network == "mainnet":
            return self.aptos_mainnet
        if network == "testnet":
            return self.aptos_testnet
        raise ValueError(f"unknown Aptos network {network!r}")

    def close(self) -> None:
        for client in (self.history, self.evm, self.aptos_mainnet, self.aptos_testnet):
            client.close()

    def __enter__(self) -> UpstreamClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def settings_from_django(api_key: str, django_settings: Any = None) -> ClientSettings:
    """ClientSettings with the UPSTREAM_* timeouts and retry count from Django settings."""
    if django_settings is None:
        from django.conf import settings as django_settings
    return ClientSettings(
        api_key=api_key,
        connect_timeout=float(getattr(django_settings, "UPSTREAM_CONNECT_TIMEOUT", 5)),
        read_timeout=float(getattr(django_settings, "UPSTREAM_READ_TIMEOUT", 30)),
        max_retries=int(getattr(django_settings, "UPSTREAM_MAX_RETRIES", 4)),
    )


def clients_for_source(
    source: SourceLike,
    settings: ClientSettings | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> UpstreamClients:
    """Clients for a `Source` (or anything with its api_key and *_base_url attributes)."""
    settings = settings or settings_from_django(source.api_key)

    def make(base_url: str) -> UpstreamClient:
        return UpstreamClient(base_url, settings, transport=transport, sleep=sleep)

    return UpstreamClients(
        history=make(source.streams_base_url),
        evm=make(source.evm_base_url),
        aptos_mainnet=make(source.aptos_mainnet_base_url),
        aptos_testnet=make(source.aptos_testnet_base_url),
    )


@dataclass
class _SettingsSource:
    api_key: str = field(repr=False)
    streams_base_url: str
    evm_base_url: str
    aptos_mainnet_base_url: str
    aptos_testnet_base_url: str


def clients_for_settings(django_settings: Any = None) -> UpstreamClients:
    """Clients for the MORALIS_* settings (the default source)."""
    if django_settings is None:
        from django.conf import settings as django_settings
    source = _SettingsSource(
        api_key=django_settings.MORALIS_API_KEY,
        streams_base_url=django_settings.MORALIS_STREAMS_BASE_URL,
        evm_base_url=django_settings.MORALIS_EVM_BASE_URL,
        aptos_mainnet_base_url=django_settings.MORALIS_APTOS_MAINNET_BASE_URL,
        aptos_testnet_base_url=django_settings.MORALIS_APTOS_TESTNET_BASE_URL,
    )
    return clients_for_source(source, settings_from_django(source.api_key, django_settings))
