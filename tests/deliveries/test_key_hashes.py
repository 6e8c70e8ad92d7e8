"""The search keys' index holds their hashes: a search matches the hashes through the index and the keys
themselves after it, and the migration that builds it on an existing table answers every search as before."""

from __future__ import annotations

import pytest
from django.db import connection

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.search import key_matches
from tests.deliveries.test_partitions import migrate_to
from tests.factories import history_record, make_source, store

BEFORE = [("deliveries", "0024_error_group_stream_counts")]


def _payload(n: int) -> dict[str, object]:
    shared = "0x" + "5a" * 20
    return {
        "confirmed": True, "chainId": "0x1", "block": {"number": str(19_000_000 + n), "timestamp": "1700000000"},
        "txs": [{"hash": f"0x{n:064x}", "fromAddress": shared if n % 3 == 0 else f"0x{n:040x}",
                 "toAddress": "0x" + "77" * 20}],
        "logs": [],
    }


def _store_some() -> list[str]:
    source = make_source()
    store(source, *[history_record(block=19_000_000 + n, payload=_payload(n)) for n in range(30)])
    keys = sorted({k for ks in Delivery.objects.values_list("search_keys", flat=True) for k in ks})
    assert any(k.startswith("tx:") for k in keys) and any(k.startswith("addr:") for k in keys)
    return keys


def _answers(keys: list[str]) -> dict[str, set[str]]:
    return {k: {str(pk) for pk in key_matches(Delivery.objects.all(), [k]).values_list("pk", flat=True)} for k in keys}


def _held(keys: list[str]) -> dict[str, set[str]]:
    """Each key's deliveries read from the column itself, no index."""
    return {k: {str(pk) for pk in Delivery.objects.filter(search_keys__contains=[k]).values_list("pk", flat=True)}
            for k in keys}


def test_a_key_search_reads_the_hash_index_then_checks_the_keys(db: None) -> None:
    keys = _store_some()
    tx = next(k for k in keys if k.startswith("tx:"))
    with connection.cursor() as cursor:
        # On a few rows Postgres would read the table: the plan it takes at size.
        cursor.execute("SET LOCAL enable_seqscan = off")
        # The function hashes each key as Postgres's own hash of its text does.
        cursor.execute("SELECT delivery_key_hashes(%s::varchar[]) = ARRAY[hashtextextended(%s, 0)]", [[tx], tx])
        assert cursor.fetchone()[0] is True
    plan = Delivery.objects.with_any_key([tx]).explain()
    with connection.cursor() as cursor:
        cursor.execute("RESET enable_seqscan")
    assert "Bitmap Index Scan on" in plan and "delivery_key_hashes_idx" in plan, plan
    assert "Index Cond: (delivery_key_hashes(search_keys) && " in plan, plan
    assert "Filter: (search_keys && " in plan, "the keys are checked after their hashes:\n" + plan
    assert _answers(keys) == _held(keys)


@pytest.mark.django_db(transaction=True)
def test_the_migration_to_hashes_answers_every_search_as_before() -> None:
    migrate_to(BEFORE)
    try:
        keys = _store_some()
        before = _held(keys)
        count = Delivery.objects.count()
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('delivery_search_keys') IS NOT NULL, to_regproc('delivery_key_hashes')")
            assert cursor.fetchone() == (True, None)
    finally:
        migrate_to()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('delivery_search_keys'), pg_get_indexdef(to_regclass('delivery_search_hashes'))"
        )
        old, definition = cursor.fetchone()
    assert old is None and "gin (delivery_key_hashes(search_keys))" in definition
    assert Delivery.objects.count() == count
    assert _answers(keys) == before
    shared = "addr:0x" + "5a" * 20
    assert len(before[shared]) == 10
    Delivery.objects.all().delete()
