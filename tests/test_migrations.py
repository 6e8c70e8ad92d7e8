"""Sources and history walks moved out of the deliveries app keep their tables and every row."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

BEFORE_MOVE = [("deliveries", "0003_payload_lz4"), ("sources", None), ("polling", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_after_it() -> None:
    old = _migrate(BEFORE_MOVE).loader.project_state(("deliveries", "0003_payload_lz4")).apps
    old_source = old.get_model("deliveries", "Source").objects.create(
        name="kept", api_key="secret", streams_base_url="http://127.0.0.1:9", evm_base_url="http://127.0.0.1:9",
        aptos_mainnet_base_url="http://127.0.0.1:9", aptos_testnet_base_url="http://127.0.0.1:9",
    )
    now = datetime(2026, 11, 1, tzinfo=UTC)
    old.get_model("deliveries", "HistoryWalk").objects.create(
        source_id=old_source.pk, kind="head", cursor="c-42", started_at=now, updated_at=now
    )
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.filter(app_label="sources", model="source").delete()
    ContentType.objects.get_or_create(app_label="deliveries", model="source")

    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(leaves)

    from dashboard.polling.models import HistoryWalk
    from dashboard.sources.models import Source

    ContentType.objects.clear_cache()
    source = Source.objects.get(pk=old_source.pk)
    assert (source.name, source.api_key) == ("kept", "secret")
    assert HistoryWalk.objects.get(source=source).cursor == "c-42"
    assert ContentType.objects.filter(app_label="sources", model="source").exists()
    assert not ContentType.objects.filter(app_label="deliveries", model="source").exists()


@pytest.mark.django_db(transaction=True)
def test_a_key_stored_in_plain_text_is_encrypted_in_place() -> None:
    old = _migrate([("sources", "0002_streams_sync_state")]).loader.project_state(
        ("sources", "0002_streams_sync_state")
    ).apps
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO deliveries_source (name, api_key, streams_base_url, evm_base_url, aptos_mainnet_base_url,"
            " aptos_testnet_base_url, enabled, is_default, created_at, consecutive_failures, records_last_poll,"
            " last_error_kind, last_error_message, rejected_key_digest, streams_sync_error)"
            " VALUES ('plain', 'plain-secret-key', 'http://x', 'http://x', 'http://x', 'http://x', true, false,"
            " now(), 0, 0, '', '', '', '') RETURNING id"
        )
        (pk,) = cursor.fetchone()
    assert old is not None
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM deliveries_source WHERE id = %s", [pk])
        (stored,) = cursor.fetchone()
    assert stored.startswith("fernet:") and "plain-secret-key" not in stored

    from dashboard.sources.models import Source

    assert Source.objects.get(pk=pk).api_key == "plain-secret-key"


@pytest.mark.django_db(transaction=True)
def test_the_stream_period_rollups_are_filled_from_the_period_rollups_stored_before() -> None:
    from dashboard.deliveries.models import PeriodRollup, StreamPeriodRollup
    from dashboard.deliveries.write_lock import INGEST_LOCK_KEY
    from dashboard.devtools.generator import generate_deliveries
    from tests.checks import assert_derived_exact

    generate_deliveries(2000, days=3, newest=datetime(2026, 3, 9, 13, tzinfo=UTC), failure_rate=0.3, analyze=False)
    _migrate([("deliveries", "0016_drop_foreign_key_indexes")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('deliveries_streamperiodrollup')")
        assert cursor.fetchone() == (None,)
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert PeriodRollup.objects.count() > StreamPeriodRollup.objects.count() > 0
    assert_derived_exact()
    fill = importlib.import_module("dashboard.deliveries.migrations.0017_stream_period_rollup").FILL
    assert f"pg_advisory_xact_lock({INGEST_LOCK_KEY})" in fill, "the migration waits for the ingest's write lock"


@pytest.mark.django_db(transaction=True)
def test_each_groups_counts_per_stream_are_filled_from_the_deliveries_stored_before() -> None:
    from dashboard.deliveries.models import ErrorGroupStream
    from dashboard.deliveries.write_lock import INGEST_LOCK_KEY
    from dashboard.devtools.generator import generate_deliveries
    from tests.checks import assert_derived_exact

    generate_deliveries(2000, days=3, newest=datetime(2026, 3, 9, 13, tzinfo=UTC), failure_rate=0.3, analyze=False)
    _migrate([("deliveries", "0023_outage_window_audit")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('deliveries_errorgroupstream')")
        assert cursor.fetchone() == (None,)
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    # Several groups over several streams, each count exact.
    assert ErrorGroupStream.objects.values("stream_id").distinct().count() > 1
    assert ErrorGroupStream.objects.values("error_group_id").distinct().count() > 1
    assert_derived_exact()
    fill = importlib.import_module("dashboard.deliveries.migrations.0024_error_group_stream_counts").FILL
    assert f"pg_advisory_xact_lock({INGEST_LOCK_KEY})" in fill, "the migration waits for the ingest's write lock"


def _indexes(table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
        return {name for (name,) in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_distinct_messages_keep_three_indexes_and_their_digests_stay_unique() -> None:
    from django.db import IntegrityError

    from dashboard.deliveries.ingest import store_records
    from dashboard.deliveries.models import ErrorMessage
    from tests.deliveries.test_ingest import make_source_row, record

    _migrate([("deliveries", "0017_stream_period_rollup")])
    assert len(_indexes("deliveries_errormessage")) == 5
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert _indexes("deliveries_errormessage") == {
        "deliveries_errormessage_pkey", "errormessage_digest", "errormessage_group_seen",
    }
    source = make_source_row()
    store_records(source, [record(1, error="timeout of 10000ms exceeded"), record(2, error="timeout of 10000ms exceeded")])
    message = ErrorMessage.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        ErrorMessage.objects.create(
            digest=message.digest, message="other", error_group=message.error_group, last_seen=message.last_seen
        )
