"""Sync state on the source, the banner on every page and the health endpoint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.polling.walks import poll
from dashboard.sources.defaults import ensure_default_source
from dashboard.sources.models import Source

pytestmark = pytest.mark.django_db


def test_a_successful_poll_records_lag_and_records_per_poll(sim: Any, sim_source: Source) -> None:
    poll(sim_source)
    sim_source.refresh_from_db()

    assert sim_source.last_success_at is not None
    assert sim_source.records_last_poll > 0
    assert sim_source.newest_upstream_date is not None
    assert sim_source.lag(sim_source.newest_upstream_date + timedelta(minutes=5)) == timedelta(minutes=5)
    assert sim_source.problem() is None


def test_the_banner_and_healthz_show_a_rejected_key(sim: Any, sim_source: Source, logged_in_client: Client) -> None:
    sim_source.api_key = "wrong"
    sim_source.save()
    with pytest.raises(Exception, match="rejected"):
        poll(sim_source)

    health = Client().get("/healthz").json()
    entry = next(s for s in health["sources"] if s["name"] == "sim")
    assert entry["ok"] is False and entry["key_rejected"] is True
    assert entry["last_error_kind"] == "rejected_key"
    assert "wrong" not in str(health)

    from dashboard.web.context_processors import sync_banner

    request = logged_in_client.get("/").wsgi_request
    problems = sync_banner(request)["sync_problems"]
    assert any("rejected the API key" in p.summary for p in problems)


def test_a_source_without_a_recent_success_is_stale(sim: Any, sim_source: Source) -> None:
    Source.objects.filter(pk=sim_source.pk).update(last_success_at=timezone.now() - timedelta(hours=1))
    sim_source.refresh_from_db()
    problem = sim_source.problem()
    assert problem is not None and "no successful poll" in problem.summary


def test_the_environment_key_makes_the_default_source_and_a_new_key_lifts_the_rejection(settings: Any) -> None:
    settings.MORALIS_API_KEY = "env-key-1"
    source = ensure_default_source()
    assert source is not None and source.is_default and source.api_key == "env-key-1"
    Source.objects.filter(pk=source.pk).update(key_rejected_at=timezone.now(), backoff_until=timezone.now() + timedelta(hours=1))

    settings.MORALIS_API_KEY = "env-key-2"
    source = ensure_default_source()

    assert source is not None
    source.refresh_from_db()
    assert source.api_key == "env-key-2" and source.key_rejected_at is None and source.backoff_until is None
    assert Source.objects.filter(is_default=True).count() == 1


@pytest.mark.parametrize("retry_after", [float("inf"), float("nan"), 1e20, -5.0])
def test_an_absurd_retry_after_backs_off_within_bounds(sim: Any, sim_source: Source, retry_after: float) -> None:
    from dashboard.sources.models import RATE_LIMIT_MAX_WAIT
    from dashboard.upstream.errors import RateLimited

    sim_source.record_failure(RateLimited("rate limited", retry_after=retry_after, status_code=429))

    sim_source.refresh_from_db()
    assert sim_source.last_error_kind == "rate_limited"
    assert sim_source.backoff_until is not None
    assert sim_source.backoff_until - timezone.now() <= RATE_LIMIT_MAX_WAIT
