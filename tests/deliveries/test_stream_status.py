"""A stream's status at the provider, recorded through one method: since when it holds moves only when it changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.deliveries.models import Stream
from tests.factories import make_source

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_the_status_holds_since_it_last_changed() -> None:
    stream = Stream(source=make_source("status"), stream_id="s1")

    assert stream.set_provider_status("active", "", T0)
    assert not stream.set_provider_status("active", "still fine", T0 + timedelta(hours=1))
    assert (stream.provider_status_since, stream.provider_seen_at) == (T0, T0 + timedelta(hours=1))
    assert stream.provider_status_message == "still fine"

    assert stream.set_provider_status("error", "x" * 3000, T0 + timedelta(hours=2))
    assert (stream.provider_status, stream.provider_status_since) == ("error", T0 + timedelta(hours=2))
    assert len(stream.provider_status_message) == 2000


def test_an_answer_is_stored_on_the_rows_it_concerns() -> None:
    source = make_source("answers")
    Stream.objects.create(source=source, stream_id="s1", provider_status="active", provider_status_since=T0)
    Stream.objects.create(source=source, stream_id="s2", provider_status="active", provider_status_since=T0)
    later = T0 + timedelta(hours=3)

    Stream.objects.filter(source=source, stream_id="s1").record_provider_status("paused", "Paused by the user", later)
    Stream.objects.filter(source=source, stream_id="s2").record_provider_status("active", "", later)

    s1, s2 = Stream.objects.filter(source=source).order_by("stream_id")
    assert (s1.provider_status, s1.provider_status_message, s1.provider_status_since) == (
        "paused", "Paused by the user", later
    )
    assert (s2.provider_status, s2.provider_status_since, s2.provider_seen_at) == ("active", T0, later)
