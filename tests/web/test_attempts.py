"""A delivery's attempt history: what polls saw change (written by the ingest path), replays, the provider's
logs, the schedule; and the time to recovery that follows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from dashboard.actions import services
from dashboard.actions.attempts import LogKind
from dashboard.actions.models import ActionState, ItemState, ProviderAction, ReplayItem
from dashboard.deliveries.models import Delivery, DeliveryChange
from dashboard.deliveries.schedule import ATTEMPT_OFFSETS
from dashboard.deliveries.status import DeliveryStatus
from dashboard.upstream.client import ClientSettings, UpstreamClient
from dashboard.upstream.streams import logs_of_block
from dashboard.web.attempts import log_kinds
from tests.actions.conftest import staff  # noqa: F401 - the fixture
from tests.actions.test_lost_answers import Provider, provider  # noqa: F401 - the fixture
from tests.factories import history_record, make_source, store


def test_polls_record_each_change_of_a_failing_delivery_and_nothing_for_a_delivered_one(db: None) -> None:
    source = make_source()
    first = timezone.now() - timedelta(hours=2)
    record = history_record(date=first, error="Request failed with status code 500")
    store(source, record)
    store(source, record)  # unchanged: nothing new
    store(source, dict(record, errorMessage="socket hang up", tinyPayload={**record["tinyPayload"], "retries": 2}))
    store(source, dict(record, errorMessage="", tinyPayload={**record["tinyPayload"], "retries": 3}))
    store(source, history_record(date=first))  # delivered at once
    changes = list(DeliveryChange.objects.order_by("id").values_list("retries", "status", "error_message"))
    assert changes == [
        (0, DeliveryStatus.RETRYING, "Request failed with status code 500"),
        (2, DeliveryStatus.RETRYING, "socket hang up"),
        (3, DeliveryStatus.DELIVERED, ""),
    ]
    assert set(DeliveryChange.objects.values_list("delivery_id", flat=True)) == {Delivery.objects.get(pk=record["id"]).pk}


def test_the_delivery_page_lists_the_attempts_and_the_time_to_recovery(db: None, logged_in_client: Client) -> None:
    source = make_source()
    first = timezone.now() - timedelta(hours=3)
    record = history_record(date=first, error="Request failed with status code 500")
    store(source, record)
    store(source, dict(record, errorMessage="", tinyPayload={**record["tinyPayload"], "retries": 2}))
    body = logged_in_client.get(f"/deliveries/{record['id']}/").content.decode()
    assert "seen by a poll" in body and "by the schedule" in body
    # Delivered at the second retry, which the schedule places 11 minutes after the first attempt.
    assert f"Recovered <strong>{ATTEMPT_OFFSETS[2] // 60} min</strong>" in body


def test_each_attempt_is_listed_once_whether_the_schedule_places_it_or_a_poll_saw_it(
    db: None, logged_in_client: Client
) -> None:
    source = make_source()
    first = timezone.now() - timedelta(hours=3)
    record = history_record(date=first, error="Request failed with status code 500")
    store(source, record)
    store(source, dict(record, errorMessage="socket hang up", tinyPayload={**record["tinyPayload"], "retries": 2}))
    # The same retry count again, now given up by a status change: no new attempt.
    store(source, dict(record, errorMessage="socket hang up", tinyPayload={**record["tinyPayload"], "retries": 2},
                       status="failed"))
    response = logged_in_client.get(f"/deliveries/{record['id']}/")
    attempts = response.context["attempts"]
    assert [a.retries for a in attempts] == [0, 1, 2]
    assert [a.origin for a in attempts] == ["by the schedule, seen by a poll", "by the schedule",
                                            "by the schedule, seen by a poll"]
    # What the poll saw of each attempt stays on its line.
    assert attempts[2].error == "socket hang up" and attempts[0].error == "Request failed with status code 500"


def test_the_providers_logs_give_the_exact_attempts(polled: Any, sim: Any, logged_in_client: Client) -> None:
    recovered = (
        Delivery.objects.filter(source=polled, status=DeliveryStatus.DELIVERED, retries__gte=1)
        .order_by("-date")
        .first()
    )
    assert recovered is not None
    body = logged_in_client.get(f"/deliveries/{recovered.pk}/?logs=1").content.decode()
    assert "read just now" in body
    assert body.count("provider&#x27;s log") + body.count("provider's log") >= recovered.retries + 1
    assert "Recovered" in body and "(provider" in body
    # The sibling delivery of the same block (the other confirmation) does not lend its attempts.
    assert "by the schedule" not in body


def test_logs_that_cannot_be_read_are_said_so_not_a_500(db: None, logged_in_client: Client, fast_upstream: None) -> None:
    source = make_source(base_url="http://127.0.0.1:9")
    record = history_record(date=datetime.now(UTC) - timedelta(hours=1), error="socket hang up")
    store(source, record)
    response = logged_in_client.get(f"/deliveries/{record['id']}/?logs=1")
    assert response.status_code == 200 and "could not be read" in response.content.decode()


def test_retry_statistics_take_a_replays_exact_time_over_the_schedule(db: None, logged_in_client: Client) -> None:
    from dashboard.actions.models import ActionKind, ActionState, ItemState, ProviderAction, ReplayItem
    from tests.conftest import make_user

    source = make_source()
    first = timezone.now() - timedelta(hours=30)
    failing = history_record(date=first, error="Request failed with status code 500", retries=6)
    store(source, failing)
    page = logged_in_client.get("/retries/?range=7d").content.decode()
    assert "Median time to success" in page
    # A replay delivered it 40 minutes after its first attempt (the schedule would say 45 h for retry 7).
    store(source, dict(failing, errorMessage=""))
    user = make_user("operator", role="Staff")
    action = ProviderAction.objects.create(kind=ActionKind.REPLAY, state=ActionState.DONE, source=source,
                                           requested_by=user, requested_by_name="operator", scope="test",
                                           target_count=1)
    ReplayItem.objects.create(action=action, delivery_id=failing["id"], stream_id=failing["streamId"],
                              delivery_date=first, retries_before=6, status_before="retrying",
                              state=ItemState.REPLAYED, delivered=True, answered_at=first + timedelta(minutes=40))
    page = logged_in_client.get("/retries/?range=7d").content.decode()
    assert "40 min" in page


def _log(record: dict[str, Any], at: datetime, retries: int, status: str) -> dict[str, Any]:
    tiny = record["tinyPayload"]
    return {
        "id": str(uuid.uuid4()), "streamId": record["streamId"], "chain": tiny["chainId"],
        "webhookUrl": record["webhookUrl"], "tag": record["tag"], "retries": retries, "deliveryStatus": status,
        "blockNumber": int(tiny["block"]), "errorMessage": "" if status == "success" else "socket hang up",
        "type": "evm", "createdAt": at.isoformat().replace("+00:00", "Z"),
    }


def test_the_page_and_the_worker_classify_the_providers_log_lines_alike(
    provider: tuple[Provider, str], staff: Any,  # noqa: F811 - the fixtures imported above
) -> None:
    """Two replays whose answers were lost, at a provider that logs a replay one retry higher: one of a recent
    failure (its next retry minutes ahead), one of a delivery whose next retry falls due as the replay is sent.
    The worker's conclusion from the logs and the delivery page's reading of each line agree."""
    state, base_url = provider
    state.replay_retry_bump = 1
    source = make_source(base_url=base_url)
    now = datetime.now(UTC)
    recent = history_record(date=now - timedelta(seconds=90), error="socket hang up", retries=1, block=21_000_001)
    # Its second retry is due now, where the replay is made.
    due = history_record(date=now - timedelta(seconds=ATTEMPT_OFFSETS[2]), error="socket hang up", retries=1,
                         block=21_000_002)
    store(source, recent, due)
    for record in (recent, due):
        state.records[record["id"]] = record
        state.script[record["id"]] = ["drop-after"]
        first = datetime.fromisoformat(record["date"])
        state.logs[:0] = [_log(record, first + timedelta(seconds=ATTEMPT_OFFSETS[1]), 1, "failed"),
                          _log(record, first, 0, "failed")]
    action = services.prepare_replay(staff, Delivery.objects.filter(pk__in=[recent["id"], due["id"]]), scope="t")
    ProviderAction.objects.filter(pk=action.pk).update(state=ActionState.QUEUED)
    client = UpstreamClient(base_url, ClientSettings(api_key="k", connect_timeout=2, read_timeout=2, max_retries=1,
                                                     backoff_cap=0.01))
    services.run_action(action.pk, client=client, sleep=lambda s: None)
    assert dict(state.posts) == {recent["id"]: 1, due["id"]: 1}

    def page_kinds(record: dict[str, Any]) -> list[LogKind | None]:
        delivery = Delivery.objects.get(pk=record["id"])
        lines = logs_of_block(client, stream_id=delivery.stream_id, block_number=int(record["tinyPayload"]["block"]),
                              chain=delivery.chain_id, not_before=None)
        replays = list(ReplayItem.objects.of_delivery(delivery.pk))
        return [kind for _, kind in sorted(log_kinds(delivery, replays=replays, logs=lines),
                                           key=lambda pair: pair[0].created_at or now)]

    worker = {str(i.delivery_id): i for i in ReplayItem.objects.filter(action=action)}
    # The recent failure: its first attempt and retry on the schedule, then our replay (logged as retry 2).
    assert page_kinds(recent) == [LogKind.SCHEDULED, LogKind.SCHEDULED, LogKind.OUR_REPLAY]
    assert worker[recent["id"]].state == ItemState.REPLAYED and "logs show the attempt" in worker[recent["id"]].answer
    # Logged as retry 2 when the schedule places retry 2: the page cannot say which, and the worker left it for a
    # person rather than send it again.
    assert page_kinds(due) == [LogKind.SCHEDULED, LogKind.SCHEDULED, LogKind.AMBIGUOUS]
    assert worker[due["id"]].state == ItemState.UNKNOWN and "could be this replay" in worker[due["id"]].answer
