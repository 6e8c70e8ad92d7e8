"""Reactivating and pausing a stream from its page, against the simulator."""

from __future__ import annotations

from typing import Any

from django.test import Client

from dashboard.actions.models import ActionState, ProviderAction
from dashboard.deliveries.models import Stream
from dashboard.polling.stream_sync import sync_streams


def test_a_stream_in_error_is_reactivated_from_its_page(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    sync_streams(polled)
    row = Stream.objects.filter(source=polled, provider_status="error").first()
    assert row is not None
    page = staff_client.get(f"/streams/{row.stream_id}/").content.decode()
    assert "Reactivate…" in page
    prepared = staff_client.post(f"/streams/{row.stream_id}/status/", {"status": "active"})
    assert prepared.status_code == 302
    confirm = staff_client.get(prepared["Location"]).content.decode()
    # The confirmation shows the status and message the provider has now.
    assert "<strong>error</strong>" in confirm and row.provider_status_message in confirm
    assert "as the provider answered just now" in confirm
    action = ProviderAction.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/actions/{action.pk}/confirm/")
        staff_client.post(f"/actions/{action.pk}/confirm/")
    action.refresh_from_db()
    assert action.state == ActionState.DONE and "active" in action.answer
    world = sim.world
    assert world.streams.status(world.streams.stream(row.stream_id), world.clock.timestamp())[0] == "active"
    sync_streams(polled)
    row.refresh_from_db()
    assert row.provider_status == "active"


def test_a_stream_already_in_the_asked_status_or_terminated_is_refused(
    polled: Any, sim: Any, staff_client: Client
) -> None:
    sync_streams(polled)
    active = Stream.objects.filter(source=polled, provider_status="active").first()
    assert active is not None
    response = staff_client.post(f"/streams/{active.stream_id}/status/", {"status": "active"})
    assert response.status_code == 400 and "already active" in response.content.decode()
    response = staff_client.post(f"/streams/{active.stream_id}/status/", {"status": "error"})
    assert response.status_code == 400 and "error and terminated are the provider" in response.content.decode()
    assert staff_client.post("/streams/no-such-stream/status/", {"status": "paused"}).status_code == 404
    assert not ProviderAction.objects.exists()


def test_the_test_webhook_after_a_reactivation_is_labelled_and_kept_out_of_the_figures(
    polled: Any, sim: Any, logged_in_client: Client
) -> None:
    from dashboard.deliveries.models import Delivery, HourlyRollup
    from dashboard.polling.walks import poll

    sync_streams(polled)
    row = Stream.objects.filter(source=polled, provider_status="error").first()
    assert row is not None
    world = sim.world
    assert world.streams.set_status(world.streams.stream(row.stream_id), "active", world.clock.timestamp()) is None
    world.clock.advance(5)
    poll(polled)
    test = Delivery.objects.get(source=polled, is_test=True)
    assert (test.stream_id, test.chain_id, test.block_number) == (row.stream_id, "", None)
    assert not HourlyRollup.objects.filter(stream_id=row.stream_id, chain_id="").exists()
    assert test.pk not in set(Delivery.objects.chain_events().values_list("pk", flat=True))
    # The overview's trailing counts (rollups and raw edge hours) leave it out too.
    from datetime import timedelta

    from dashboard.deliveries.trailing_counts import trailing_counts

    at = world.clock.now()
    counts = trailing_counts(at, (1, 24))
    for hours in (1, 24):
        window = Delivery.objects.filter(date__gte=at - timedelta(hours=hours), date__lte=at)
        assert counts[f"total_{hours}"] == window.chain_events().count() == window.count() - 1
    page = logged_in_client.get(f"/deliveries/{test.pk}/").content.decode()
    assert "Test webhook to" in page
    listed = logged_in_client.get(f"/deliveries/?stream={row.stream_id}").content.decode()
    assert "test webhook" in listed


def test_a_block_is_re_sent_from_a_delivery_page(
    polled: Any, sim: Any, staff_client: Client, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    from dashboard.deliveries.models import Delivery

    sync_streams(polled)
    active = Stream.objects.filter(source=polled, provider_status="active").values_list("stream_id", flat=True)
    delivery = Delivery.objects.filter(source=polled, stream_id__in=list(active)).order_by("-date").first()
    assert delivery is not None and delivery.block_number is not None
    assert "Re-send block…" in staff_client.get(f"/deliveries/{delivery.pk}/").content.decode()
    before = len(sim.world.history.extras)
    prepared = staff_client.post("/actions/resend-block/", {
        "stream": delivery.stream_id, "chain": delivery.chain_id, "block": str(delivery.block_number),
    })
    assert prepared.status_code == 302
    assert "Re-send the block" in staff_client.get(prepared["Location"]).content.decode()
    action = ProviderAction.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(f"/actions/{action.pk}/confirm/")
        staff_client.post(f"/actions/{action.pk}/confirm/")
    action.refresh_from_db()
    assert action.state == ActionState.DONE, action.answer
    resent = sim.world.history.extras[before:]
    assert len(resent) == 1 and resent[0].event.number == delivery.block_number


def test_bad_block_requests_answer_400(polled: Any, staff_client: Client) -> None:
    sync_streams(polled)
    row = Stream.objects.filter(source=polled).first()
    assert row is not None
    for data, text in [
        ({"stream": row.stream_id, "block": "12x"}, "whole number"),
        ({"stream": row.stream_id, "block": "5", "chain": "0x999"}, "does not watch that chain"),
    ]:
        response = staff_client.post("/actions/resend-block/", data)
        assert response.status_code == 400 and text in response.content.decode()
    assert staff_client.post("/actions/resend-block/", {"stream": "nope", "block": "1"}).status_code == 404
    assert not ProviderAction.objects.exists()


def test_a_terminated_stream_offers_no_status_change_and_says_why(polled: Any, staff_client: Client) -> None:
    sync_streams(polled)
    row = Stream.objects.filter(source=polled).first()
    assert row is not None
    Stream.objects.filter(pk=row.pk).update(provider_status="terminated")
    page = staff_client.get(f"/streams/{row.stream_id}/").content.decode()
    assert "Reactivate…" not in page and "Pause…" not in page
    assert "You confirm on the next page" not in page
    assert "it cannot be reactivated, only recreated" in page
