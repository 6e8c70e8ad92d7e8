"""Secrets at rest: provider API keys (and any other secret a model stores) are encrypted in the database
with Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`), under keys from the environment.

`ENCRYPTION_KEYS` lists Fernet keys, newest first: the first encrypts, every one decrypts (MultiFernet), so a
new key is put in front, `manage.py rotate_secrets` re-encrypts every stored secret with it, and the old key
is dropped afterwards. Unset, one key is derived from SECRET_KEY (fine for development; in production set
ENCRYPTION_KEYS, or rotating SECRET_KEY makes the stored secrets unreadable — a deploy check says so).

Stored values carry a prefix, so a value written before encryption (plain text) is still read, and is
encrypted the next time its row is saved (the sources migration does that for every existing key).
This module imports no app: every app may use it.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

PREFIX = "fernet:"


class UnreadableSecret(ValueError):
    """A stored secret no configured key can decrypt (ENCRYPTION_KEYS lost or changed)."""


def _derived_key(secret_key: str) -> bytes:
    digest = hashlib.sha256(f"stream-dashboard secrets at rest:{secret_key}".encode()).digest()
    return base64.urlsafe_b64encode(digest)


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    materials = [k.encode() for k in keys] if keys else [_derived_key(secret_key)]
    return MultiFernet([Fernet(k) for k in materials])


def fernet() -> MultiFernet:
    return _fernet(tuple(settings.ENCRYPTION_KEYS), settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    if not plain:
        return ""
    return PREFIX + fernet().encrypt(plain.encode()).decode()


def is_encrypted(stored: str) -> bool:
    return stored.startswith(PREFIX)


def decrypt(stored: str) -> str:
    if not is_encrypted(stored):
        return stored
    try:
        return fernet().decrypt(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret(
            "a stored secret cannot be decrypted with ENCRYPTION_KEYS (or the key derived from SECRET_KEY)"
        ) from None


def rotate(stored: str) -> str:
    """The same secret encrypted under the first key (plain text is encrypted)."""
    if not stored:
        return stored
    if not is_encrypted(stored):
        return encrypt(stored)
    try:
        return PREFIX + fernet().rotate(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret("a stored secret cannot be decrypted with ENCRYPTION_KEYS") from None


def valid_key(text: str) -> bool:
    try:
        Fernet(text.encode())
    except (ValueError, TypeError):
        return False
    return True


# (table, column) of every column holding secrets encrypted here, registered by the app that owns it, so that
# `rotate_secrets` re-encrypts them all without knowing the apps.
ENCRYPTED_COLUMNS: set[tuple[str, str]] = set()


def register_column(table: str, column: str) -> None:
    ENCRYPTED_COLUMNS.add((table, column))


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """A text column holding `fernet:<token>`; the model attribute is the plain text. Never filter on it:
    the same secret encrypts differently each time."""

    def contribute_to_class(self, cls: Any, name: str, private_only: bool = False) -> None:
        super().contribute_to_class(cls, name, private_only)
        if not cls._meta.abstract and cls.__module__ != "__fake__":
            register_column(cls._meta.db_table, self.get_attname_column()[1] or name)

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None:
            return value
        try:
            return decrypt(value)
        except UnreadableSecret:
            # A row must stay readable (and its page open) when the key is wrong: the secret reads as empty,
            # so the upstream rejects it and the source's error says why.
            return ""

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "" or (isinstance(value, str) and is_encrypted(value)):
            return value
        return encrypt(str(value))
