"""The poll stores exactly what the upstream holds, over real HTTP into real Postgres, and never twice."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.management import call_command

from dashboard.deliveries.models import Delivery
from dashboard.polling.tasks import poll_source_task
from dashboard.polling.walks import poll_head
from dashboard.sources.models import Source

pytestmark = pytest.mark.django_db


def upstream_truth(simulator: Any) -> dict[uuid.UUID, dict[str, Any]]:
    return {uuid.UUID(r["id"]): r for r in simulator.world.history_records(include_payload=True)}


def test_it_stores_exactly_the_upstream_records(simulator: Any, source: Source) -> None:
    truth = upstream_truth(simulator)
    assert len(truth) > 100, "the simulator should serve several pages"

    result = poll_head(source)

    stored = {d.id: d for d in Delivery.objects.all()}
    assert set(stored) == set(truth)
    assert result.stored.inserted == len(truth)
    for record_id, record in truth.items():
        delivery = stored[record_id]
        assert delivery.stream_id == record["streamId"]
        assert delivery.tag == record["tag"]
        assert delivery.webhook_url == record["webhookUrl"]
        assert delivery.error_message == record["errorMessage"]
        assert delivery.retries == int(record["tinyPayload"]["retries"])
        assert delivery.payload == record.get("payload")


def test_a_second_poll_adds_nothing(simulator: Any, source: Source) -> None:
    poll_head(source)
    count = Delivery.objects.count()

    second = poll_head(source)

    assert Delivery.objects.count() == count
    assert second.stored.inserted == 0
    assert second.pages == 1


def test_the_celery_task_polls_the_source(simulator: Any, source: Source) -> None:
    poll_source_task.apply(args=[source.id])

    assert Delivery.objects.count() == len(upstream_truth(simulator))
    source.refresh_from_db()
    assert source.last_success_at is not None
    assert source.consecutive_failures == 0


def test_the_command_polls_once(simulator: Any, source: Source, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("poll_history", "--once")

    assert Delivery.objects.count() == len(upstream_truth(simulator))
    assert "simulator:" in capsys.readouterr().out


def test_a_rejected_key_is_recorded_on_the_source(simulator: Any, source: Source) -> None:
    from dashboard.upstream.errors import RejectedKey

    source.api_key = "wrong-key"
    source.save()

    with pytest.raises(RejectedKey):
        poll_head(source)

    source.refresh_from_db()
    assert source.key_rejected_at is not None
    assert source.last_error_kind == "rejected_key"
    assert "wrong-key" not in source.last_error_message
    assert Delivery.objects.count() == 0


def test_the_command_leaves_a_source_alone_while_a_worker_polls_it(
    simulator: Any, source: Source, capsys: pytest.CaptureFixture[str]
) -> None:
    from dashboard.locks import exclusive
    from dashboard.polling.jobs import source_lock_name

    served = simulator.world.requests_served
    with exclusive(source_lock_name(source.pk)) as held:
        assert held is not None
        call_command("poll_history", "--once")

    assert simulator.world.requests_served == served
    assert "a poll of this source is already running" in capsys.readouterr().out
    call_command("poll_history", "--once")
    assert Delivery.objects.count() == len(upstream_truth(simulator))


def test_a_poll_that_wrote_rows_leaves_the_health_estimate_computed(simulator: Any, source: Source) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from dashboard.deliveries import url_health
    from dashboard.deliveries.models import HourlyRollup
    from dashboard.polling.jobs import poll_source as run_poll

    assert run_poll(source).result is not None

    now = timezone.now()
    with CaptureQueriesContext(connection) as captured:
        estimate = url_health.url_health_now(now)
    # Read from the cache: only the rollups' change stamp was asked, no attempts replayed.
    assert not any("GROUP BY" in q["sql"] for q in captured.captured_queries)
    rows = HourlyRollup.objects.between(HourlyRollup.hour_of(now - url_health.WINDOW), None).attempts_by_url()
    assert estimate == url_health.replay(rows, now) and estimate
