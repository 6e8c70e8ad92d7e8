"""Sources and history walks moved out of the deliveries app keep their tables and every row."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
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
