"""Re-encrypt every stored secret with the first key of ENCRYPTION_KEYS, or print a new key.

Rotation: generate a key (`rotate_secrets --new-key`), put it first in ENCRYPTION_KEYS (keep the old one
after it) on every host and restart, run `rotate_secrets`, then drop the old key and restart again.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from dashboard.encryption import ENCRYPTED_COLUMNS, UnreadableSecret, rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored secret with the first key of ENCRYPTION_KEYS (or print a new key)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--new-key", action="store_true", help="print a new Fernet key and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["new_key"]:
            self.stdout.write(Fernet.generate_key().decode())
            return
        total = 0
        with transaction.atomic(), connection.cursor() as cursor:
            for table, column in sorted(ENCRYPTED_COLUMNS):
                cursor.execute(f"SELECT id, {column} FROM {table} WHERE {column} <> '' FOR UPDATE")  # noqa: S608
                for pk, stored in cursor.fetchall():
                    try:
                        fresh = rotate(stored)
                    except UnreadableSecret:
                        raise CommandError(
                            f"{table} row {pk}: its secret cannot be decrypted with ENCRYPTION_KEYS; "
                            "put the key it was written with back in the list"
                        ) from None
                    cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [fresh, pk])  # noqa: S608
                    total += 1
        self.stdout.write(f"{total} secret{'' if total == 1 else 's'} re-encrypted with the first key.")
