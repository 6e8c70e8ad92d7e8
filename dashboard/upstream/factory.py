"""The four upstream clients of one provider project, built from anything with its key and base URLs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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


def clients_for_source(
    source: SourceLike,
    settings: ClientSettings,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> UpstreamClients:
    """Clients for a `Source` (or anything with its api_key and *_base_url attributes)."""
    def make(base_url: str) -> UpstreamClient:
        return UpstreamClient(base_url, settings, transport=transport, sleep=sleep)

    return UpstreamClients(
        history=make(source.streams_base_url),
        evm=make(source.evm_base_url),
        aptos_mainnet=make(source.aptos_mainnet_base_url),
        aptos_testnet=make(source.aptos_testnet_base_url),
    )
