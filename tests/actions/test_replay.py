"""Replays against the simulator, from the pages: one delivery, and exactly the deliveries of a filter."""

from __future__ import annotations

from typing import Any

from django.test import Client

from dashboard.actions.models import ActionState, ItemState, ProviderAction, ReplayItem
from dashboard.deliveries.models import Delivery, Stream
from dashboard.deliveries.status import DeliveryStatus
from dashboard.polling.stream_sync import sync_streams
from dashboard.polling.walks import poll


def replays_made(sim: Any, delivery_id: str) -> int:
    """How many replays of this record the simulator received (attempts it made beyond its schedule)."""
    world = sim.world
    found = world.history.find(delivery_id, world.clock.timestamp())
    assert found is not None
    return sum(1 for attempt in world.history.attempts_made(found, world.clock.timestamp()) if attempt.replay)


def active_failures(source: Any, sim: Any) -> tuple[str, list[Delivery]]:
    """A stream active at the provider, and its stored failing deliveries.

    At the scenario's start the streams still active have no failures (their retries delivered them); five
    minutes in, the swaps' slow receiver has failed some of its deliveries, which are on their retry
    schedule, and the provider keeps the stream active until its URL's success rate falls below 70."""
    sim.world.clock.advance(5 * 60)
    for _ in range(20):
        if poll(source).complete:
            break
    sync_streams(source)
    active = set(Stream.objects.filter(source=source, provider_status="active").values_list("stream_id", flat=True))
    failing = Delivery.objects.filter(source=source, stream_id__in=active).failures()
    stream_id = failing.values_list("stream_id", flat=True).first()
    assert stream_id is not None, "the scenario has failures on a stream that is still active"
    return stream_id, list(failing.filter(stream_id=stream_id).order_by("date"))


def test_a_failed_delivery_is_replayed_once_from_its_page(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    _, failing = active_failures(polled, sim)
    delivery = failing[0]
    page = staff_client.get(f"/deliveries/{delivery.pk}/")
    assert "Replay…" in page.content.decode()
    prepared = staff_client.post("/actions/replay/", {"delivery": str(delivery.pk)})
    assert prepared.status_code == 302
    action = ProviderAction.objects.get()
    assert action.state == ActionState.DRAFT and action.target_count == 1
    confirm_page = staff_client.get(prepared["Location"]).content.decode()
    assert "Replay 1 delivery" in confirm_page and str(delivery.pk) in confirm_page
    assert replays_made(sim, str(delivery.pk)) == 0, "nothing is sent before the confirmation"
    # A double submit of the confirmation.
    with django_capture_on_commit_callbacks(execute=True) as sent:
        for _ in range(2):
            assert staff_client.post(f"/actions/{action.pk}/confirm/").status_code == 302
    assert len(sent) == 1, "one confirmation queues one task"
    action.refresh_from_db()
    assert action.state == ActionState.DONE, action.answer
    item = ReplayItem.objects.get(action=action)
    assert item.state == ItemState.REPLAYED and item.delivered is not None
    assert replays_made(sim, str(delivery.pk)) == 1
    # The delivery page shows the replay and its result.
    body = staff_client.get(f"/deliveries/{delivery.pk}/").content.decode()
    assert f"#{action.pk}" in body and "Replays asked from here" in body
    if item.delivered:
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.DELIVERED


def test_a_bulk_replay_sends_exactly_the_filtered_deliveries_once_each(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    stream_id, failing = active_failures(polled, sim)
    filters = f"stream={stream_id}&status=failing"
    listed = staff_client.get(f"/deliveries/?{filters}").content.decode()
    assert "Replay these…" in listed
    prepared = staff_client.post("/actions/replay/", {"filters": filters})
    assert prepared.status_code == 302, prepared.content.decode()[:500]
    action = ProviderAction.objects.get()
    assert action.target_count == len(failing) and action.stream_id == stream_id
    assert f"Replay {len(failing)} deliver" in staff_client.get(prepared["Location"]).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/actions/{action.pk}/confirm/")
        staff_client.post(f"/actions/{action.pk}/confirm/")
    action.refresh_from_db()
    assert action.state == ActionState.DONE
    items = list(ReplayItem.objects.filter(action=action))
    assert {i.delivery_id for i in items} == {d.pk for d in failing}
    assert all(i.state == ItemState.REPLAYED for i in items)
    for d in failing:
        assert replays_made(sim, str(d.pk)) == 1
    # Nothing outside the filter was replayed.
    others = Delivery.objects.filter(source=polled).exclude(pk__in=[d.pk for d in failing])[:200]
    assert all(replays_made(sim, str(d.pk)) == 0 for d in others)
    progress = staff_client.get(f"/actions/{action.pk}/").content.decode()
    assert f"{len(failing)} of {len(failing)} done" in progress


def test_a_replay_of_a_stream_in_error_is_refused_by_the_provider_and_says_so(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    sync_streams(polled)
    down = Stream.objects.filter(source=polled, provider_status="error").values_list("stream_id", flat=True)
    delivery = Delivery.objects.filter(source=polled, stream_id__in=list(down)).first()
    assert delivery is not None
    prepared = staff_client.post("/actions/replay/", {"delivery": str(delivery.pk)})
    action = ProviderAction.objects.get()
    # The confirmation warns before anything is sent.
    confirm_page = " ".join(staff_client.get(prepared["Location"]).content.decode().split())
    assert "js-provider-warning" in confirm_page
    assert "will likely refuse this, and the receiver will not get these deliveries" in confirm_page
    # It predicts a refusal of the whole request, so it offers no enabled button to send it, and says why.
    assert 'disabled title="The provider would refuse this: see above"' in confirm_page
    assert "Not offered: the provider refuses replays for a stream in error or terminated" in confirm_page
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/actions/{action.pk}/confirm/")
    item = ReplayItem.objects.get(action=action)
    assert item.state == ItemState.REFUSED and "error state" in item.answer
    assert replays_made(sim, str(delivery.pk)) == 0
    # Nothing replayed: not shown as done.
    action.refresh_from_db()
    assert action.state == ActionState.FAILED, action.answer
    listing = staff_client.get("/actions/").content.decode()
    assert "pill-action-failed" in listing and "pill-action-done" not in listing


def test_a_replay_of_a_terminated_stream_is_refused_as_terminated_not_in_error(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    sync_streams(polled)
    down = Stream.objects.filter(source=polled, provider_status="error").values_list("stream_id", flat=True)
    delivery = Delivery.objects.filter(source=polled, stream_id__in=list(down)).first()
    assert delivery is not None
    # The provider answers "Stream is in error state" for a terminated stream as well.
    Stream.objects.filter(stream_id=delivery.stream_id).update(provider_status="terminated")
    prepared = staff_client.post("/actions/replay/", {"delivery": str(delivery.pk)})
    action = ProviderAction.objects.get()
    confirm_page = " ".join(staff_client.get(prepared["Location"]).content.decode().split())
    assert "a terminated stream cannot be reactivated, only recreated" in confirm_page
    assert "reactivate the stream first" not in confirm_page
    assert "Not offered: the provider refuses replays for a stream it has terminated" in confirm_page
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/actions/{action.pk}/confirm/")
    item = ReplayItem.objects.get(action=action)
    assert item.state == ItemState.REFUSED
    assert item.answer.startswith("The stream is terminated at the provider"), item.answer
    assert "cannot be reactivated" in item.answer


def test_a_replay_of_an_active_stream_gives_no_warning(polled: Any, sim: Any, staff_client: Client) -> None:
    _, failing = active_failures(polled, sim)
    prepared = staff_client.post("/actions/replay/", {"delivery": str(failing[0].pk)})
    page = staff_client.get(prepared["Location"]).content.decode()
    assert "js-provider-warning" not in page
    assert "js-refusal-expected" not in page and " disabled " not in page
    assert "pill-provider-active" in page


def test_a_replay_partly_refused_is_not_done(polled: Any, sim: Any, staff_client: Client) -> None:
    from dashboard.actions import services

    _, failing = active_failures(polled, sim)
    staff_client.post("/actions/replay/", {"delivery": str(failing[0].pk)})
    action = ProviderAction.objects.get()
    ProviderAction.objects.filter(pk=action.pk).update(target_count=2)
    ReplayItem.objects.filter(action=action).update(state=ItemState.REPLAYED)
    action.refresh_from_db()
    assert services.replay_outcome(action) == ActionState.PARTIAL


def test_a_replay_cancelled_before_confirmation_shows_as_cancelled(polled: Any, sim: Any, staff_client: Client) -> None:
    stream_id, failing = active_failures(polled, sim)
    staff_client.post("/actions/replay/", {"filters": f"stream={stream_id}&status=failing"})
    action = ProviderAction.objects.get()
    assert staff_client.post(f"/actions/{action.pk}/cancel/").status_code == 302
    action.refresh_from_db()
    assert action.state == ActionState.CANCELLED and action.finished_at is not None
    assert set(ReplayItem.objects.filter(action=action).values_list("state", flat=True)) == {ItemState.SKIPPED}
    page = " ".join(staff_client.get(f"/actions/{action.pk}/").content.decode().split())
    assert "not yet" not in page and "Waiting" not in page and "pending:" not in page
    assert f"Cancelled: 0 of {len(failing)} sent" in page
    listing = staff_client.get("/actions/").content.decode()
    assert "<th>Prepared</th><th>Confirmed</th>" in listing and "not confirmed" in listing


def test_a_cancelled_replay_sends_nothing_more(polled: Any, sim: Any, staff_client: Client) -> None:
    from dashboard.actions import services
    from dashboard.actions.tasks import run_action_task

    stream_id, failing = active_failures(polled, sim)
    staff_client.post("/actions/replay/", {"filters": f"stream={stream_id}&status=failing"})
    action = ProviderAction.objects.get()
    services.confirm(action, queue=run_action_task.delay)  # queued; the task is not run (tasks are not eager here)
    staff_client.post(f"/actions/{action.pk}/cancel/")
    services.run_action(action.pk)
    action.refresh_from_db()
    assert action.state == ActionState.CANCELLED
    assert set(ReplayItem.objects.filter(action=action).values_list("state", flat=True)) == {ItemState.SKIPPED}
    assert all(replays_made(sim, str(d.pk)) == 0 for d in failing)


def test_bad_replay_requests_answer_400_with_a_message(polled: Any, staff_client: Client, settings: Any) -> None:
    cases = {
        "not-a-uuid": ({"delivery": "12345"}, "is a UUID"),
        "unknown id": ({"delivery": "3fa85f64-5717-4562-b3fc-2c963f66afa6"}, "No delivery with this id"),
        "bad filter": ({"filters": "status=sideways"}, "Select a valid choice"),
        "matches nothing": ({"filters": "stream=nothing-here"}, "No delivery matches"),
    }
    for name, (data, text) in cases.items():
        response = staff_client.post("/actions/replay/", data)
        assert response.status_code == 400, name
        assert text in response.content.decode(), name
    settings.REPLAY_MAX_DELIVERIES = 2
    response = staff_client.post("/actions/replay/", {"filters": "status=failing"})
    assert response.status_code == 400 and "more than 2 deliveries" in response.content.decode()
    assert not ProviderAction.objects.exists()


def test_an_unconfirmed_action_expires(polled: Any, staff_client: Client, settings: Any) -> None:
    from datetime import timedelta

    delivery = Delivery.objects.filter(source=polled).first()
    assert delivery is not None
    staff_client.post("/actions/replay/", {"delivery": str(delivery.pk)})
    action = ProviderAction.objects.get()
    ProviderAction.objects.filter(pk=action.pk).update(created_at=action.created_at - timedelta(hours=2))
    response = staff_client.post(f"/actions/{action.pk}/confirm/")
    assert response.status_code == 400 and "prepare it again" in response.content.decode()
    action.refresh_from_db()
    assert action.state == ActionState.EXPIRED
