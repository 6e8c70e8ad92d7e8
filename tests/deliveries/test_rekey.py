"""Stored deliveries get the keys the extraction gives now (decoded events included), batch by batch."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from dashboard.deliveries.models import Delivery
from tests.factories import history_record, make_source, store
from tests.web.test_decoded_payload import payload

pytestmark = pytest.mark.django_db


def test_it_rewrites_keys_that_differ_and_leaves_the_rest() -> None:
    source = make_source()
    records = [history_record(block=n, payload=payload()) for n in range(5)] + [history_record(block=9)]
    store(source, *records)
    expected = {d.pk: d.search_keys for d in Delivery.objects.all()}
    assert all("event:transfer" in keys for pk, keys in expected.items() if keys != ["block:9"])
    # as an older version stored them: no event keys
    stale = [r["id"] for r in records[:3]]
    for delivery in Delivery.objects.filter(pk__in=stale):
        delivery.search_keys = [k for k in delivery.search_keys if not k.startswith("event:")]
        delivery.save(update_fields=["search_keys"])
    out = StringIO()
    call_command("refresh_search_keys", "--batch", "2", stdout=out)
    assert "Done: 6 deliveries read, 3 updated." in out.getvalue()
    assert {d.pk: d.search_keys for d in Delivery.objects.all()} == expected
    again = StringIO()
    call_command("refresh_search_keys", stdout=again)
    assert "Done: 6 deliveries read, 0 updated." in again.getvalue()
