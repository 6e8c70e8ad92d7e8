"""Provider API keys are encrypted at rest (dashboard/encryption.py); keys stored before are encrypted in place."""

import dashboard.encryption
from django.db import migrations


def encrypt_existing_keys(apps, schema_editor):
    """Keys stored in plain text before encryption are encrypted in place (read and written as raw text, so
    what is written is exactly the ciphertext)."""
    from dashboard.encryption import encrypt, is_encrypted

    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id, api_key FROM deliveries_source WHERE api_key <> ''")
        for pk, stored in cursor.fetchall():
            if not is_encrypted(stored):
                cursor.execute("UPDATE deliveries_source SET api_key = %s WHERE id = %s", [encrypt(stored), pk])


def decrypt_keys(apps, schema_editor):
    from dashboard.encryption import decrypt

    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id, api_key FROM deliveries_source WHERE api_key <> ''")
        for pk, stored in cursor.fetchall():
            cursor.execute("UPDATE deliveries_source SET api_key = %s WHERE id = %s", [decrypt(stored)[:512], pk])


class Migration(migrations.Migration):

    dependencies = [
        ('sources', '0002_streams_sync_state'),
    ]

    operations = [
        migrations.AlterField(
            model_name='source',
            name='api_key',
            field=dashboard.encryption.EncryptedTextField(blank=True),
        ),
        migrations.RunPython(encrypt_existing_keys, decrypt_keys),
    ]
