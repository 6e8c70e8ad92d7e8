"""/metrics: refused without the token or an allowed address; after polls of the simulator, in this process and
in other processes, its numbers equal the database's and the simulator's."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Count
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationStatus, TargetKind
from dashboard.deliveries.models import Delivery, HourlyRollup
from dashboard.locks import redis_client
from dashboard.polling.jobs import poll_source
from dashboard.sources.models import Source
from tests.checks import subprocess_database_url
from tests.factories import source_for

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "scrape-token-0123456789"


@pytest.fixture
def metrics_token(settings: Any) -> str:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []
    return TOKEN


def scrape(client: Client | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed by name and sorted labels."""
    answer = (client or Client()).get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (n, ls), value in samples.items() if n == name and wanted <= set(ls))


@pytest.mark.django_db
def test_an_anonymous_scrape_is_refused(metrics_token: str) -> None:
    assert Client().get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


@pytest.mark.django_db
def test_an_empty_token_setting_never_matches(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = []
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


@pytest.mark.django_db
def test_allowed_networks_scrape_without_a_token(settings: Any) -> None:
    from ipaddress import ip_network

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = [ip_network("10.1.0.0/16"), ip_network("::1/128")]
    assert Client().get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="10.2.0.1").status_code == 403
    # A forged X-Forwarded-For is not believed without a proxy in front.
    assert Client().get("/metrics", REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_FOR="10.1.2.3").status_code == 403


def test_a_bad_network_setting_stops_the_process() -> None:
    env = {**os.environ, "SECRET_KEY": "x" * 50, "METRICS_ALLOWED_NETWORKS": "10.0.0.0/8,intranet"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "METRICS_ALLOWED_NETWORKS must list networks such as 10.0.0.0/8, got 'intranet'" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_a_scrape_after_a_poll_matches_the_database_and_the_upstream(
    metrics_token: str, make_simulator: Any, fast_upstream: None, no_stale_locks: None
) -> None:
    sim = make_simulator(start=timezone.now().replace(microsecond=0))
    source = source_for(sim, name="metered")
    before = scrape()
    requests_before = sim.world.requests_served

    run = poll_source(source)
    assert run.result is not None and run.outcome == "ok"
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    stored = Delivery.objects.filter(source=source).count()
    assert stored > 0
    assert delta("dashboard_polls_total", source="metered", outcome="ok") == 1
    assert delta("dashboard_records_ingested_total", source="metered", result="new") == stored
    assert delta("dashboard_records_ingested_total", source="metered", result="changed") == 0
    # Each new delivery's processing latency, once, in the rollups' buckets (by chain and confirmation only).
    timed = Delivery.objects.filter(source=source, is_test=False).exclude(latency_ms=None)
    assert timed.exists()
    assert delta("dashboard_delivery_latency_seconds_count") == timed.count()
    assert delta("dashboard_delivery_latency_seconds_bucket", le="10.0") == timed.filter(latency_ms__lte=10_000).count()
    # Every request the simulator answered was counted once, and timed once.
    served = sim.world.requests_served - requests_before
    assert delta("dashboard_upstream_requests_total", source="metered") == served
    assert delta("dashboard_upstream_requests_total", source="metered", operation="GET /history",
                 status_class="2xx") == run.result.pages
    assert delta("dashboard_upstream_request_duration_seconds_count", source="metered") == served

    # A second poll reads the head again: the records it sees are unchanged, none new.
    run = poll_source(source)
    again = scrape()
    assert total(again, "dashboard_records_ingested_total", source="metered", result="new") == total(
        after, "dashboard_records_ingested_total", source="metered", result="new")
    assert total(again, "dashboard_records_ingested_total", source="metered", result="unchanged") > 0
    assert Delivery.objects.filter(source=source).count() == stored
    assert total(again, "dashboard_delivery_latency_seconds_count") == total(after, "dashboard_delivery_latency_seconds_count")

    # The state read at scrape time.
    source.refresh_from_db()
    lag = total(again, "dashboard_source_poll_lag_seconds", source="metered")
    assert source.lag() is not None and abs(lag - source.lag().total_seconds()) < 5
    assert total(again, "dashboard_source_healthy", source="metered") == 1
    assert total(again, "dashboard_source_revisit_age_seconds", source="metered") < 60
    since = HourlyRollup.hour_of(timezone.now() - timedelta(hours=23))
    expected = Delivery.objects.filter(date__gte=since).values_list("stream_id", "status").annotate(n=Count("id"))
    assert expected
    for stream_id, status, n in expected:
        assert total(again, "dashboard_stream_deliveries_24h", stream=stream_id, status=status) == n
    assert total(again, "dashboard_stream_deliveries_24h") == Delivery.objects.filter(date__gte=since).count()
    assert total(again, "dashboard_metrics_database_ok") == 1


@pytest.mark.django_db(transaction=True)
def test_a_poll_refused_by_the_upstream_counts_as_its_error_kind(
    metrics_token: str, make_simulator: Any, fast_upstream: None, no_stale_locks: None
) -> None:
    sim = make_simulator()
    source = source_for(sim, name="refused", api_key="not-the-key")
    before = scrape()
    run = poll_source(source)
    after = scrape()
    assert run.outcome == "rejected_key"
    assert total(after, "dashboard_polls_total", source="refused", outcome="rejected_key") - total(
        before, "dashboard_polls_total", source="refused", outcome="rejected_key") == 1
    assert total(after, "dashboard_upstream_requests_total", source="refused", status_class="4xx") - total(
        before, "dashboard_upstream_requests_total", source="refused", status_class="4xx") == 1
    assert total(after, "dashboard_source_healthy", source="refused") == 0
    # Skipped while it backs off.
    assert poll_source(source).outcome == "skipped_backoff"
    assert total(scrape(), "dashboard_polls_total", source="refused", outcome="skipped_backoff") - total(
        after, "dashboard_polls_total", source="refused", outcome="skipped_backoff") == 1


@pytest.mark.django_db(transaction=True)
def test_counters_of_other_processes_add_up(
    metrics_token: str, make_simulator: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Two pollers in two processes, as two Celery workers would be: the scrape shows both."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    sims = {name: make_simulator(start=timezone.now().replace(microsecond=0), seed=seed)
            for name, seed in (("first", 3), ("second", 4))}
    sources = {name: source_for(sim, name=name) for name, sim in sims.items()}
    environment = {**os.environ, "DEBUG": "1", "DATABASE_URL": subprocess_database_url(), "MORALIS_API_KEY": "",
                   "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    children = [
        subprocess.Popen([sys.executable, "manage.py", "poll_history", "--once", "--source", name], cwd=ROOT,
                         env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for name in sources
    ]
    for child in children:
        output, _ = child.communicate(timeout=120)
        assert child.returncode == 0, output
    assert len(list(directory.glob("counter_*.db"))) == 2  # one file per process

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    samples = scrape()
    for name, source in sources.items():
        stored = Delivery.objects.filter(source=source).count()
        assert stored > 0
        assert total(samples, "dashboard_records_ingested_total", source=name, result="new") == stored
        assert total(samples, "dashboard_polls_total", source=name, outcome="ok") == 1
        assert total(samples, "dashboard_upstream_requests_total", source=name) == sims[name].world.requests_served


@pytest.mark.django_db(transaction=True)
def test_incidents_mails_and_the_queue_are_read_at_scrape_time(metrics_token: str) -> None:
    now = timezone.now()
    rule = AlertRule.objects.create(name="Metered rule")
    for n in range(3):
        incident = Incident.objects.create(
            rule=rule, target_kind=TargetKind.STREAM, target_key=f"stream-{n}", summary="failing",
            opened_at=now, last_holding_at=now, message_id=f"<i{n}@x>", resolved_at=now if n == 2 else None,
        )
        Notification.objects.create(
            kind="opened", rule=rule, incident=incident, status=[NotificationStatus.SENT, NotificationStatus.FAILED,
                                                                 NotificationStatus.HELD][n],
            recipients=["ops@example.com"], subject="s", body_text="t", body_html="h", message_id=f"<m{n}@x>",
            created_at=now,
        )
    from dashboard.celery import app

    queue = app.conf.task_default_queue
    broker = redis_client()
    broker.delete(queue)
    broker.rpush(queue, "a", "b")
    try:
        samples = scrape()
    finally:
        broker.delete(queue)
    assert total(samples, "dashboard_open_incidents", rule="Metered rule") == 2
    for status in ("sent", "failed", "held"):
        assert total(samples, "dashboard_alert_mails", status=status) == Notification.objects.filter(
            status=status).count()
    assert total(samples, "dashboard_celery_queue_length", queue=queue) == 2
    assert total(samples, "dashboard_metrics_broker_ok") == 1


@pytest.mark.django_db
def test_the_readiness_answer_turns_503_when_every_source_is_unhealthy(sim_source: Source) -> None:
    from tests.factories import make_source

    sim_source.last_success_at = timezone.now()
    sim_source.save()
    broken = make_source("broken", base_url="http://127.0.0.1:9", api_key="k", last_success_at=timezone.now())
    Source.objects.filter(pk=broken.pk).update(key_rejected_at=timezone.now(), last_error_message="401")
    ready = Client().get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert {s["name"]: s["ok"] for s in ready.json()["sources"]} == {"broken": False, sim_source.name: True}

    # Stale: no successful poll for longer than the banner allows.
    Source.objects.filter(pk=sim_source.pk).update(last_success_at=timezone.now() - timedelta(hours=3))
    answer = Client().get("/readyz")
    assert answer.status_code == 503 and answer.json()["ready"] is False
    assert "no successful poll" in answer.json()["sources"][1]["problem"]
    # The load balancer's probe is unchanged.
    assert Client().get("/healthz").status_code == 200

    Source.objects.update(enabled=False)
    assert Client().get("/readyz").status_code == 200  # nothing to ingest


@pytest.mark.django_db(transaction=True)
def test_the_grafana_dashboard_and_alert_rules_use_only_metrics_the_endpoint_exports(
    metrics_token: str, make_simulator: Any, fast_upstream: None, no_stale_locks: None
) -> None:
    import json
    import re

    poll_source(source_for(make_simulator(start=timezone.now().replace(microsecond=0)), name="exported"))
    # Every series the scrape has, and every family it describes (open incidents may have no series yet).
    exported = {name for name, _labels in scrape()}
    text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    exported |= set(re.findall(r"^# TYPE (\S+)", text, flags=re.M))
    dashboard = json.loads((ROOT / "deploy/grafana/stream-dashboard.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = (ROOT / "deploy/prometheus/alerts.yml").read_text()
    used = set(re.findall(r"\bdashboard_[a-z0-9_]+", " ".join(expressions) + rules))
    assert used and used <= exported, used - exported


@pytest.mark.django_db
def test_staff_logged_in_open_the_metrics_from_the_admin_and_viewers_do_not(settings: Any) -> None:
    from tests.conftest import make_user

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = []
    staff = Client()
    staff.force_login(make_user("operator", staff=True))
    assert 'href="/metrics"' in staff.get("/admin/").content.decode()
    answer = staff.get("/metrics")
    assert answer.status_code == 200 and b"dashboard_metrics_database_ok" in answer.content
    viewer = Client()
    viewer.force_login(make_user("reader"))
    assert viewer.get("/metrics").status_code == 403
