"""The provider's truth beside ours: stream statuses and stats synced from the simulator, shown on the pages,
and the `provider_error_state` alert condition."""

from __future__ import annotations

from typing import Any

import httpx
from django.test import Client
from django.utils import timezone

from dashboard.alerts.evaluate import evaluate_all
from dashboard.alerts.models import AlertRule, Condition, Incident
from dashboard.deliveries.models import Stream
from dashboard.polling import jobs
from dashboard.polling.stream_sync import sync_streams
from tests.conftest import SIMULATOR_KEY
from tests.factories import history_record, make_source, store


def provider_streams(sim: Any) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=sim.base_url, headers={"X-API-Key": SIMULATOR_KEY}) as http:
        body = http.get("/streams/evm", params={"limit": 100}).json()
        return {s["id"]: s for s in body["result"]}


def provider_stats(sim: Any, stream_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=sim.base_url, headers={"X-API-Key": SIMULATOR_KEY}) as http:
        return dict(http.get(f"/stats/{stream_id}").json())


def test_a_sync_stores_every_stream_as_the_provider_lists_it(polled: Any, sim: Any) -> None:
    result = sync_streams(polled)
    truth = provider_streams(sim)
    assert result.errors == [] and result.streams == len(truth)
    rows = {row.stream_id: row for row in Stream.objects.filter(source=polled)}
    assert set(rows) == set(truth)
    for stream_id, item in truth.items():
        row = rows[stream_id]
        assert (row.provider_status, row.provider_status_message) == (item["status"], item["statusMessage"])
        assert row.description == item["description"] and row.provider_chain_ids == item["chainIds"]
        stats = provider_stats(sim, stream_id)
        assert (row.stats_delivered, row.stats_failed) == (stats["totalWebhooksDelivered"], stats["totalWebhooksFailed"])
    # The scripted incidents really put streams in error.
    assert any(row.failing_at_provider for row in rows.values())
    polled.refresh_from_db()
    assert polled.streams_synced_at is not None and polled.streams_sync_error == ""


def test_the_poll_syncs_the_streams_when_due_and_not_on_every_run(polled: Any, settings: Any) -> None:
    settings.STREAM_SYNC_SECONDS = 3600
    jobs.poll_source(polled)
    polled.refresh_from_db()
    first = polled.streams_synced_at
    assert first is not None and Stream.objects.exclude(provider_status="").exists()
    jobs.poll_source(polled)
    polled.refresh_from_db()
    assert polled.streams_synced_at == first


def test_a_status_change_at_the_provider_is_stored_at_the_next_sync(polled: Any, sim: Any) -> None:
    sync_streams(polled)
    row = Stream.objects.filter(source=polled, provider_status="active").first()
    assert row is not None
    stream = sim.world.streams.stream(row.stream_id)
    sim.world.streams.set_status(stream, "paused", sim.world.clock.timestamp())
    sync_streams(polled)
    row.refresh_from_db()
    assert row.provider_status == "paused" and row.provider_status_since is not None


def test_the_streams_page_and_a_stream_page_show_the_providers_status(
    polled: Any, logged_in_client: Client
) -> None:
    sync_streams(polled)
    down = Stream.objects.filter(source=polled).failing_at_provider().first()
    assert down is not None
    page = logged_in_client.get("/streams/")
    assert page.status_code == 200
    assert "in error or terminated at the provider" in page.content.decode()
    detail = logged_in_client.get(f"/streams/{down.stream_id}/")
    body = detail.content.decode()
    assert detail.status_code == 200
    assert down.provider_status in body and down.provider_status_message in body
    assert "Counts: the provider" in body and str(down.stats_failed) in body
    # A viewer never sees a button that acts at the provider.
    assert "Reactivate" not in body and "/status/" not in body


def test_a_stream_page_says_when_the_provider_and_our_estimate_disagree(db: None, logged_in_client: Client) -> None:
    source = make_source()
    store(source, *(history_record(block=19_000_000 + n) for n in range(5)))
    row = Stream.objects.get(source=source)
    body = logged_in_client.get(f"/streams/{row.stream_id}/").content.decode()
    assert "status-disagreement" not in body
    Stream.objects.filter(pk=row.pk).update(provider_status="error", provider_status_message="Webhook failing")
    body = logged_in_client.get(f"/streams/{row.stream_id}/").content.decode()
    assert "status-disagreement" in body and "our estimate did not expect it" in body


def test_an_unknown_stream_page_is_a_404(polled: Any, logged_in_client: Client) -> None:
    assert logged_in_client.get("/streams/not-a-stream/").status_code == 404


def test_a_stream_in_error_at_the_provider_opens_an_incident_of_the_default_rule(polled: Any) -> None:
    rule = AlertRule.objects.get(condition=Condition.PROVIDER_ERROR_STATE)
    assert rule.enabled
    sync_streams(polled)
    down = set(Stream.objects.filter(source=polled).failing_at_provider().values_list("stream_id", flat=True))
    assert down
    evaluate_all(timezone.now())
    opened = set(Incident.objects.filter(rule=rule).values_list("target_key", flat=True))
    assert opened == down
    incident = Incident.objects.filter(rule=rule).first()
    assert incident is not None and "at the provider" in incident.summary
