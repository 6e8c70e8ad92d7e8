"""Deterministic random values shaped like chain data: hex hashes, addresses, UUIDv4s."""

from __future__ import annotations

import hashlib
import random
import uuid


def rng(*parts: object) -> random.Random:
    """A generator seeded from `parts`; the same parts give the same stream on every run and platform."""
    return random.Random(":".join(str(p) for p in parts))


def digest_int(*parts: object) -> int:
    """A stable 64-bit integer from `parts`; cheaper than building a Random for one decision."""
    data = ":".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def unit(*parts: object) -> float:
    """A stable number in [0, 1) from `parts`."""
    return digest_int(*parts) / 2**64


def hex_bytes(r: random.Random, n: int) -> str:
    return "0x" + r.getrandbits(8 * n).to_bytes(n, "big").hex()


def address(r: random.Random) -> str:
    return hex_bytes(r, 20)


def tx_hash(r: random.Random) -> str:
    return hex_bytes(r, 32)


def uuid4(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


def pad_topic(addr: str) -> str:
    """An address as a 32-byte log topic."""
    return "0x" + addr[2:].lower().rjust(64, "0")
