"""`/metrics` for Prometheus: the counters every process records, and the state read at scrape time.

Counters and histograms are recorded where the work happens, each in its layer's `metrics.py`: upstream
requests and their latency (`upstream/metrics.py`, by the transport), records stored (`deliveries/metrics.py`,
by the write path) and polls by outcome (`polling/metrics.py`, by `jobs.poll_source`). With
PROMETHEUS_MULTIPROC_DIR set, every process (gunicorn workers, Celery workers) writes them to files in that
directory and a scrape adds them up, so its numbers are right however many processes run; without it, a
scrape shows the web process's own counters only.

The state is read from the database and Redis at scrape time by cheap queries, so every web process answers
the same: each source's lag, revisit age and health (the banner's rule, `Source.problem`), deliveries of the
last 24 hours per stream and status (from the hourly rollups, never the deliveries table), open incidents per
rule, alert mails per status, and the Celery queue's length; with a read replica, whether it answers and its
lag. Where each marked page read (replica, or primary and why) is counted by `replica.py` (`READS`).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterator
from datetime import timedelta

import redis
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from dashboard import replica
from dashboard.accounts.access import is_staff_member
from dashboard.alerts.models import Incident, Notification, NotificationStatus
from dashboard.client_address import client_address
from dashboard.deliveries.models import HourlyRollup, Stream
from dashboard.sources.models import Source
from dashboard.visibility import EVERYTHING, viewing

log = logging.getLogger(__name__)

STREAM_WINDOW = timedelta(hours=24)


def scrape_allowed(request: HttpRequest) -> bool:
    """A bearer token equal to METRICS_TOKEN, a client address in METRICS_ALLOWED_NETWORKS, or a staff member
    logged in to the dashboard (the admin's header links here)."""
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode()):
        return True
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        address = None
    if address is not None and any(address in network for network in settings.METRICS_ALLOWED_NETWORKS):
        return True
    return is_staff_member(getattr(request, "user", None) or AnonymousUser())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not scrape_allowed(request):
        return HttpResponse(
            "Forbidden: send Authorization: Bearer <METRICS_TOKEN>, scrape from METRICS_ALLOWED_NETWORKS, or log in "
            "as staff.\n",
            status=403, content_type="text/plain; charset=utf-8",
        )
    state = CollectorRegistry()
    state.register(StateCollector())
    # Those allowed to scrape (the metrics token, an allowed network, staff) read every stream's series: the
    # scraper is anonymous to the request's visibility. Team members cannot scrape.
    with viewing(EVERYTHING):
        body = process_metrics() + generate_latest(state)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def process_metrics() -> bytes:
    """The counters and histograms: every process's (multi-process mode), else this process's own."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


class StateCollector(Collector):
    """Gauges read from the database and Redis when scraped."""

    def collect(self) -> Iterator[Metric]:
        database_ok = GaugeMetricFamily(
            "dashboard_metrics_database_ok", "1 when the scrape could read the database, else 0."
        )
        try:
            yield from self._sources()
            yield from self._streams()
            yield from self._alerts()
            database_ok.add_metric([], 1)
        except Exception:  # noqa: BLE001 - a scrape reports a broken database, it does not fail
            log.exception("metrics: reading the database failed")
            database_ok.add_metric([], 0)
        yield database_ok
        yield from self._queues()
        yield from self._replica()

    def _sources(self) -> Iterator[Metric]:
        now = timezone.now()
        lag = GaugeMetricFamily(
            "dashboard_source_poll_lag_seconds",
            "Now minus the newest upstream record's date stored for the source.", labels=["source"],
        )
        revisit = GaugeMetricFamily(
            "dashboard_source_revisit_age_seconds",
            "Seconds since the source's retry window was last re-read in full.", labels=["source"],
        )
        success = GaugeMetricFamily(
            "dashboard_source_last_success_age_seconds",
            "Seconds since the source's last successful poll.", labels=["source"],
        )
        failures = GaugeMetricFamily(
            "dashboard_source_consecutive_failures", "Polls of the source failed in a row.", labels=["source"],
        )
        healthy = GaugeMetricFamily(
            "dashboard_source_healthy",
            "1 unless the source is stale, failing or its key rejected (the banner's and /readyz's rule).",
            labels=["source"],
        )
        for source in Source.objects.enabled().order_by("name"):
            if (source_lag := source.lag(now)) is not None:
                lag.add_metric([source.name], source_lag.total_seconds())
            if source.last_revisit_at is not None:
                revisit.add_metric([source.name], (now - source.last_revisit_at).total_seconds())
            if source.last_success_at is not None:
                success.add_metric([source.name], (now - source.last_success_at).total_seconds())
            failures.add_metric([source.name], source.consecutive_failures)
            healthy.add_metric([source.name], 0 if source.problem(now) else 1)
        yield from (lag, revisit, success, failures, healthy)

    def _streams(self) -> Iterator[Metric]:
        since = HourlyRollup.hour_of(timezone.now() - STREAM_WINDOW + timedelta(hours=1))
        deliveries = GaugeMetricFamily(
            "dashboard_stream_deliveries_24h",
            "Deliveries of the stream dated in the last 24 hours (from the start of the hour 23 hours ago), by "
            "their current status, from the hourly rollups.",
            labels=["stream", "tag", "status"],
        )
        tags = dict(Stream.objects.values_list("stream_id", "tag"))
        rows = (
            HourlyRollup.objects.between(since, None)
            .values("stream_id", "status")
            .annotate(n=Sum("deliveries"))
            .order_by("stream_id", "status")
        )
        for row in rows:
            deliveries.add_metric([row["stream_id"], tags.get(row["stream_id"], ""), row["status"]], row["n"])
        yield deliveries

    def _alerts(self) -> Iterator[Metric]:
        incidents = GaugeMetricFamily(
            "dashboard_open_incidents", "Open alert incidents, by rule.", labels=["rule"]
        )
        for name, n in (
            Incident.objects.open().values_list("rule__name").annotate(n=Count("id")).order_by("rule__name")
        ):
            incidents.add_metric([name], n)
        yield incidents
        mails = GaugeMetricFamily(
            "dashboard_alert_mails",
            "Alert mails by status: sent, failed, held (back by the hourly cap), pending, sending, digested "
            "(went out in a digest), skipped. Rows are kept, so sent and failed only grow; use increase().",
            labels=["status"],
        )
        counts = dict(Notification.objects.values_list("status").annotate(n=Count("id")).order_by())
        for status in NotificationStatus.values:
            mails.add_metric([status], counts.get(status, 0))
        yield mails

    def _replica(self) -> Iterator[Metric]:
        # Described always; a series only with a replica configured.
        up = GaugeMetricFamily(
            "dashboard_replica_up", "1 when the read replica (DATABASE_REPLICA_URL) answered the scrape, else 0."
        )
        lag = GaugeMetricFamily(
            "dashboard_replica_lag_seconds",
            "How far the read replica is behind the primary: 0 when it has replayed all it received, else the "
            "age of the last transaction it replayed. Pages read the primary while it exceeds "
            "REPLICA_MAX_LAG_SECONDS.",
        )
        if replica.configured():
            status = replica.replica_status()
            up.add_metric([], 1 if status.ok else 0)
            if status.lag_seconds is not None:
                lag.add_metric([], status.lag_seconds)
        yield up
        yield lag

    def _queues(self) -> Iterator[Metric]:
        from dashboard.celery import app

        queues = sorted({q.name for q in app.conf.task_queues or ()} | {app.conf.task_default_queue})
        length = GaugeMetricFamily(
            "dashboard_celery_queue_length", "Tasks waiting in the Celery queue (Redis LLEN).", labels=["queue"]
        )
        redis_ok = GaugeMetricFamily("dashboard_metrics_broker_ok", "1 when the scrape could read the broker.")
        try:
            client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2, socket_timeout=2)
            with client:
                for queue in queues:
                    length.add_metric([queue], client.llen(queue))
            redis_ok.add_metric([], 1)
        except redis.RedisError:
            log.warning("metrics: the broker did not answer")
            redis_ok.add_metric([], 0)
        yield length
        yield redis_ok
