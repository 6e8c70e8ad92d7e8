"""Owners of NFT contracts on the EVM chains, with indexing that starts on first request.

Every well-formed contract address has owners derived from the seed (some have none). A contract
not indexed before is SYNCING from its first request until `sync_delay` simulated seconds later,
showing a growing share of its owners; then SYNCED for good.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dashboard.simulator import catalog, entropy
from dashboard.simulator.media import collection as media_collection

IMAGE_HOSTS = ("ipfs://", "https://ipfs.io/ipfs/", "https://arweave.net/")
TRAITS = {
    "Background": ("Blue", "Orange", "Purple", "Aquamarine", "Yellow", "Gray"),
    "Eyes": ("Bored", "Sleepy", "Laser", "3d", "Robot", "Closed"),
    "Fur": ("Brown", "Golden", "Zombie", "Noise", "Cream", "Black"),
    "Hat": ("Beanie", "Fez", "Halo", "Sushi Chef", "Bandana"),
}


@dataclass(frozen=True)
class OwnerToken:
    token_id: int
    owner_of: str
    amount: int
    block_number: int
    block_number_minted: int
    token_uri: str | None
    metadata: dict[str, Any] | None
    token_hash: str
    last_token_uri_sync: str | None
    last_metadata_sync: str | None
    possible_spam: bool
    media_status: str

    @property
    def media_ready(self) -> bool:
        """Whether the media CDN has thumbnails of this token."""
        return self.media_status == "success" and (self.metadata or {}).get("image") is not None


@dataclass(frozen=True)
class Contract:
    chain: catalog.Chain
    address: str
    name: str | None
    symbol: str | None
    contract_type: str
    verified: bool
    pre_indexed: bool
    tokens: tuple[OwnerToken, ...]


def _iso_ms(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class OwnersWorld:
    def __init__(self, *, seed: int, sync_delay: float, start: float) -> None:
        self.seed = seed
        self.sync_delay = sync_delay
        self.start = start
        self._lock = threading.Lock()
        self._contracts: dict[tuple[str, str], Contract] = {}
        self._indexing_started: dict[tuple[str, str], float] = {}
        # token hash -> token id, for every token the media CDN has thumbnails of.
        self._media: dict[str, int] = {}

    def contract(self, chain: catalog.Chain, address: str) -> Contract:
        key = (chain.hex_id, address.lower())
        found = self._contracts.get(key)
        if found is None:
            generated = self._generate(chain, address.lower())
            with self._lock:
                found = self._contracts.setdefault(key, generated)
                if found is generated:
                    for token in generated.tokens:
                        if token.media_ready:
                            self._media.setdefault(token.token_hash, token.token_id)
        return found

    def media_token_id(self, token_hash: str) -> int | None:
        """The id of the token whose thumbnails the CDN serves under `token_hash`, if any.

        The CDN knows the tokens of contracts requested so far, as the provider's knows indexed ones.
        """
        with self._lock:
            return self._media.get(token_hash)

    def sync_state(self, contract: Contract, now: float) -> tuple[str, float]:
        """("SYNCING" or "SYNCED", share of owners indexed so far); the first call starts indexing."""
        if contract.pre_indexed:
            return "SYNCED", 1.0
        key = (contract.chain.hex_id, contract.address)
        with self._lock:
            started = self._indexing_started.setdefault(key, now)
        elapsed = now - started
        if self.sync_delay <= 0 or elapsed >= self.sync_delay:
            return "SYNCED", 1.0
        return "SYNCING", max(0.0, elapsed / self.sync_delay)

    def _generate(self, chain: catalog.Chain, address: str) -> Contract:
        known = catalog.known_nft_contract(chain.hex_id, address)
        r = entropy.rng(self.seed, "owners", chain.hex_id, address)
        if known is not None:
            name: str | None = known.name
            symbol: str | None = known.symbol
            contract_type = known.contract_type
            count = r.randint(150, 320)
            pre_indexed = known.pre_indexed
            verified = True
        else:
            contract_type = "ERC1155" if r.random() < 0.3 else "ERC721"
            word = r.choice(("Pixel", "Moon", "Cyber", "Lazy", "Astro", "Neon", "Ghost", "Meta"))
            noun = r.choice(("Punks", "Cats", "Lions", "Frogs", "Wizards", "Tickets", "Badges", "Lands"))
            # Some contracts never set a name: null must be handled downstream.
            name = None if r.random() < 0.08 else f"{word} {noun}"
            symbol = None if name is None else (word[:2] + noun[:2]).upper()
            count = 0 if r.random() < 0.12 else r.randint(1, 260)
            pre_indexed = False
            verified = r.random() < 0.1
        # Domain-name style collections use 256-bit token ids; they exercise format=hex and big integers.
        huge_ids = r.random() < 0.2 and known is None
        minted_from = catalog.block_at(chain, self.start - 400 * 86400)
        head = catalog.block_at(chain, self.start)
        holders = [entropy.address(r) for _ in range(max(1, count // 3))]
        tokens: list[OwnerToken] = []
        ids_seen: set[int] = set()
        for i in range(count):
            token_id = (
                r.getrandbits(256) if huge_ids else (i if contract_type == "ERC721" else r.randint(1, 60))
            )
            if token_id in ids_seen:
                token_id = max(ids_seen) + 1
            ids_seen.add(token_id)
            minted = r.randint(minted_from, head - 10)
            block = r.randint(minted, head)
            has_uri = r.random() > 0.05
            token_uri = (
                f"{r.choice(IMAGE_HOSTS)}Qm{entropy.hex_bytes(r, 22)[2:]}/{token_id}" if has_uri else None
            )
            metadata: dict[str, Any] | None = None
            if has_uri and r.random() > 0.07:
                metadata = {
                    "name": f"{name or 'Token'} #{token_id}"
                    if not huge_ids
                    else f"{entropy.hex_bytes(r, 4)[2:]}.eth",
                    "description": f"{name or 'An unnamed collection'}: token {token_id}.",
                    "image": f"ipfs://Qm{entropy.hex_bytes(r, 22)[2:]}/{token_id}.png",
                    "attributes": [
                        {"trait_type": trait, "value": r.choice(values)}
                        for trait, values in TRAITS.items()
                        if r.random() < 0.8
                    ],
                }
                if r.random() < 0.3:
                    metadata["external_url"] = f"https://example-collection.io/token/{token_id}"
            synced = self.start - r.uniform(3600, 90 * 86400)
            tokens.append(
                OwnerToken(
                    token_id=token_id,
                    owner_of=r.choice(holders),
                    amount=1 if contract_type == "ERC721" else r.randint(1, 25),
                    block_number=block,
                    block_number_minted=minted,
                    token_uri=token_uri,
                    metadata=metadata,
                    token_hash=hashlib.md5(
                        f"{address}:{token_id}".encode(), usedforsecurity=False
                    ).hexdigest(),
                    last_token_uri_sync=_iso_ms(synced) if has_uri else None,
                    last_metadata_sync=_iso_ms(synced + 2) if metadata is not None else None,
                    # A verified collection is never flagged as spam (the draw is kept so ids stay the same).
                    possible_spam=r.random() < 0.03 and not verified,
                    media_status=r.choice(
                        ("success", "success", "success", "processing", "unsupported_media")
                    ),
                )
            )
        return Contract(chain, address, name, symbol, contract_type, verified, pre_indexed, tuple(tokens))


def render_owner(
    contract: Contract,
    token: OwnerToken,
    *,
    hex_ids: bool,
    normalize: bool,
    media: bool,
    media_base_url: str,
) -> dict[str, Any]:
    """One owner record; `media_base_url` is where the media CDN (this simulator) is reached."""
    record: dict[str, Any] = {
        "token_address": contract.address,
        "token_id": hex(token.token_id) if hex_ids else str(token.token_id),
        "owner_of": token.owner_of,
        "block_number": str(token.block_number),
        "block_number_minted": str(token.block_number_minted),
        "token_hash": token.token_hash,
        "amount": str(token.amount),
        "possible_spam": token.possible_spam,
        "contract_type": contract.contract_type,
        "name": contract.name,
        "symbol": contract.symbol,
        "token_uri": token.token_uri,
        "metadata": json.dumps(token.metadata) if token.metadata is not None else None,
        "last_token_uri_sync": token.last_token_uri_sync,
        "last_metadata_sync": token.last_metadata_sync,
        "minter_address": None,
        "verified_collection": contract.verified,
        "normalized_metadata": _normalized(token.metadata) if normalize else None,
    }
    if media:
        record["media"] = _media(token, media_base_url)
    return record


def _normalized(metadata: dict[str, Any] | None) -> dict[str, Any]:
    m = metadata or {}
    return {
        "name": m.get("name"),
        "description": m.get("description"),
        "image": m.get("image"),
        "external_link": m.get("external_url"),
        "animation_url": None,
        "attributes": [
            {
                "trait_type": a["trait_type"],
                "value": a["value"],
                "display_type": None,
                "max_value": None,
                "trait_count": 0,
                "order": None,
            }
            for a in m.get("attributes", [])
        ],
    }


def _media(token: OwnerToken, base_url: str) -> dict[str, Any]:
    original = (token.metadata or {}).get("image")
    return {
        "status": token.media_status if original is not None else "unsupported_media",
        "category": "image" if original is not None else None,
        "mimetype": "image/png" if original is not None else None,
        "original_media_url": original,
        "media_collection": media_collection(base_url, token.token_hash) if token.media_ready else None,
    }
