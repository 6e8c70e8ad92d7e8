"""NFTs by creator on Aptos, one independent data set per network (mainnet, testnet)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dashboard.simulator import entropy

U64_MAX = "18446744073709551615"
# Addresses from the provider's own examples, so documentation snippets find something.
EXAMPLE_CREATORS = {
    "mainnet": (
        "0x4d09404aecb8aa005d7cd2ffe0bf604d584c866ae40ba05d8cec2b77ff5ba221",
        "0x9125e4054d884fdc7296b66e12c0d63a7baa0d88c77e8e784987c0a967c670ac",
    ),
    "testnet": ("0x0b11e89a399fa11c802099024498da9fc6512bd3d2d3068f0e78320bd6243990",),
}
COLLECTIONS = (
    "Aptos Monkeys",
    "Topaz Troopers",
    "Aptomingos",
    "Bruh Bears",
    "Souffl3 Genesis",
    "Pontem Space Pirates",
    "Aptos Names V1",
    "Spooks",
)


@dataclass(frozen=True)
class CreatorToken:
    version: int
    item: dict[str, Any]


class CreatorsWorld:
    def __init__(self, *, seed: int, network: str, start: float) -> None:
        self.seed = seed
        self.network = network
        self.start = start
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[CreatorToken, ...]] = {}
        r = entropy.rng(seed, "aptos-creators", network)
        # Creators with enough tokens to need several pages.
        self.known_creators: tuple[str, ...] = EXAMPLE_CREATORS[network] + tuple(
            entropy.hex_bytes(r, 32) for _ in range(3)
        )

    def tokens_of(self, creator: str) -> tuple[CreatorToken, ...]:
        creator = creator.lower()
        found = self._tokens.get(creator)
        if found is None:
            found = self._generate(creator)
            with self._lock:
                found = self._tokens.setdefault(creator, found)
        return found

    def tokens_for(self, creators: list[str]) -> list[dict[str, Any]]:
        """Every token of the given creators, most recently changed first."""
        merged: list[CreatorToken] = []
        for creator in dict.fromkeys(c.lower() for c in creators):
            merged.extend(self.tokens_of(creator))
        merged.sort(key=lambda t: t.version, reverse=True)
        return [t.item for t in merged]

    def _generate(self, creator: str) -> tuple[CreatorToken, ...]:
        r = entropy.rng(self.seed, "aptos", self.network, creator)
        if creator in self.known_creators:
            count = r.randint(120, 260)
        else:
            count = 0 if r.random() < 0.25 else r.randint(1, 40)
        collections = [
            (
                r.choice(COLLECTIONS) + ("" if self.network == "mainnet" else " (testnet)"),
                entropy.hex_bytes(r, 32)[2:],
            )
            for _ in range(1 + count // 60)
        ]
        # Two collections of one creator never share a name: a repeated name gets a number, as on chain where
        # a creator's collection names are unique.
        seen: dict[str, int] = {}
        for index, (collection_name, collection_hash) in enumerate(collections):
            seen[collection_name] = seen.get(collection_name, 0) + 1
            if seen[collection_name] > 1:
                collections[index] = (f"{collection_name} {seen[collection_name]}", collection_hash)
        # Aptos ledger versions: about 1.5 billion on mainnet in 2024, fewer on testnet.
        head = 1_500_000_000 if self.network == "mainnet" else 900_000_000
        out: list[CreatorToken] = []
        # Tokens are numbered within their collection (#1…#n), so a collection's numbers run as far as the
        # tokens paging returns for it.
        numbered: dict[str, int] = {}
        for _ in range(count):
            collection, collection_hash = r.choice(collections)
            number = numbered[collection_hash] = numbered.get(collection_hash, 0) + 1
            version = r.randint(head - 400_000_000, head)
            ts = self.start - r.uniform(0, 500 * 86400)
            dt = datetime.fromtimestamp(ts, UTC)
            limited = r.random() < 0.5
            item = {
                "collection_data_id_hash": collection_hash,
                "collection_name": collection,
                "creator_address": creator,
                "default_properties": None if r.random() < 0.3 else {"TOKEN_BURNABLE_BY_OWNER": "0x01"},
                "description": f"{collection} #{number}",
                "description_mutable": r.random() < 0.2,
                "largest_property_version": str(r.choice((0, 0, 1, 2))),
                "last_transaction_timestamp": dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "last_transaction_version": str(version),
                "maximum": str(r.choice((1, 1000, 10000))) if limited else U64_MAX,
                "maximum_mutable": r.random() < 0.1,
                "metadata_uri": f"https://arweave.net/{entropy.hex_bytes(r, 16)[2:]}/{number}.json",
                "name": f"{collection} #{number}",
                "payee_address": creator if r.random() < 0.7 else entropy.hex_bytes(r, 32),
                "properties_mutable": r.random() < 0.3,
                "royalty_mutable": r.random() < 0.2,
                "royalty_points_denominator": str(r.choice((100, 1000, 10000))),
                "royalty_points_numerator": str(r.choice((0, 5, 25, 50))),
                "supply": str(r.randint(0, 5)),
                "token_data_id_hash": entropy.hex_bytes(r, 32)[2:],
                "uri_mutable": r.random() < 0.2,
            }
            # A token's supply never passes its maximum (1 for a one-of-one edition).
            item["supply"] = str(min(int(str(item["supply"])), int(str(item["maximum"]))))
            out.append(CreatorToken(version, item))
        return tuple(out)
