"""Secrets stored in the database (alert channels' URLs, signing secrets, routing keys), encrypted at rest.

Fernet (AES-128-CBC with an HMAC-SHA256, from `cryptography`) with the keys in SECRETS_ENCRYPTION_KEY:
the first key encrypts, every key decrypts, so a new key is rotated in by putting it first. Without a
key, DEBUG derives one from SECRET_KEY (settings.py) so that development works out of the box; production
refuses to store or read a secret rather than fall back to a key that a SECRET_KEY rotation would lose.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class UnreadableSecret(Exception):
    """A stored secret no configured key can decrypt (the key was changed or removed)."""


def _fernet() -> MultiFernet:
    keys = list(settings.SECRETS_ENCRYPTION_KEYS)
    if not keys:
        raise ImproperlyConfigured(
            "SECRETS_ENCRYPTION_KEY must be set to store or read channel secrets when DEBUG is off"
        )
    return MultiFernet([Fernet(key) for key in keys])


def encrypt(plain: str) -> str:
    return "" if not plain else _fernet().encrypt(plain.encode()).decode("ascii")


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except InvalidToken:
        raise UnreadableSecret("no configured SECRETS_ENCRYPTION_KEY decrypts this secret; enter it again") from None
