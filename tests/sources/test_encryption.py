"""Provider API keys are encrypted at rest, readable through the model, and rotated by a command."""

from __future__ import annotations

import io
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from dashboard import encryption
from dashboard.encryption import UnreadableSecret, decrypt, encrypt
from dashboard.sources.defaults import ensure_default_source
from dashboard.sources.models import Source
from tests.factories import make_source


def stored_key(source: Source) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM deliveries_source WHERE id = %s", [source.pk])
        (value,) = cursor.fetchone()
    return str(value)


def test_the_key_is_stored_encrypted_and_read_back_plain(db: None) -> None:
    source = make_source(api_key="moralis-secret-123")
    raw = stored_key(source)
    assert raw.startswith("fernet:") and "moralis-secret-123" not in raw
    assert Source.objects.get(pk=source.pk).api_key == "moralis-secret-123"
    # The same key encrypts differently each time: nothing in the table tells two sources share a key.
    other = make_source("other", api_key="moralis-secret-123")
    assert stored_key(other) != raw


def test_rotation_re_encrypts_with_the_new_key(db: None, settings: Any) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = [old]
    source = make_source(api_key="rotate-me")
    before = stored_key(source)
    settings.ENCRYPTION_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "1 secret re-encrypted" in out.getvalue()
    after = stored_key(source)
    assert after != before
    settings.ENCRYPTION_KEYS = [new]
    assert decrypt(after) == "rotate-me" and Source.objects.get(pk=source.pk).api_key == "rotate-me"
    settings.ENCRYPTION_KEYS = [old]
    with pytest.raises(UnreadableSecret):
        decrypt(after)
    # A row whose key cannot be read still opens: its key reads as empty.
    assert Source.objects.get(pk=source.pk).api_key == ""


def test_a_new_key_can_be_printed(db: None) -> None:
    out = io.StringIO()
    call_command("rotate_secrets", "--new-key", stdout=out)
    Fernet(out.getvalue().strip().encode())


def test_plain_text_written_before_encryption_still_reads(db: None) -> None:
    assert decrypt("legacy-plain") == "legacy-plain"
    assert decrypt(encrypt("x")) == "x" and encrypt("") == ""


def test_the_default_source_is_not_made_over_a_source_of_its_name_from_the_admin(db: None, settings: Any) -> None:
    # The insert does not fail (no statement carrying the key in the database's log), and the source added
    # in the admin is not taken over by the environment.
    settings.MORALIS_API_KEY = "env-key"
    make_source("default", api_key="older")
    assert ensure_default_source() is None and ensure_default_source() is None
    source = Source.objects.get()
    assert source.name == "default" and source.api_key == "older" and not source.is_default


def test_rotation_covers_every_registered_secret_column(db: None, settings: Any) -> None:
    from dashboard.alerts import channels
    from dashboard.alerts.models import Channel, ChannelKind

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = [old]
    channel = Channel(name="hook", kind=ChannelKind.WEBHOOK)
    channels.store_settings(channel, url="https://hooks.example.com/in", secret="s" * 32)
    channel.save()
    make_source(api_key="k-1")
    settings.ENCRYPTION_KEYS = [new, old]
    out = io.StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "3 secrets re-encrypted" in out.getvalue()
    settings.ENCRYPTION_KEYS = [new]
    channel.refresh_from_db()
    assert encryption.decrypt(channel.url_encrypted) == "https://hooks.example.com/in"
