"""Health endpoints, no secrets and no upstream text: anyone can read them. `/healthz` for load balancers: is
this web process able to serve (database, Redis)? `/readyz` for monitoring: is ingestion working (some enabled
source healthy by the banner's rule)? A source's problem is said without the upstream's own words."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from dashboard import replica
from dashboard.locks import redis_client
from dashboard.sources.models import Source


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, Any] = {}
    ok = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
        ok = False
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        redis_client().ping()
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        ok = False
        checks["redis"] = f"error: {type(exc).__name__}"
    sources = []
    if checks["database"] == "ok":
        for source in Source.objects.enabled():
            problem = source.problem()
            sources.append(
                {
                    "name": source.name,
                    "ok": problem is None,
                    "problem": problem.public_summary if problem else "",
                    "last_success_at": source.last_success_at.isoformat() if source.last_success_at else None,
                    "newest_upstream_date": (
                        source.newest_upstream_date.isoformat() if source.newest_upstream_date else None
                    ),
                    "consecutive_failures": source.consecutive_failures,
                    "last_error_kind": source.last_error_kind,
                    "lag_seconds": int(source_lag.total_seconds()) if (source_lag := source.lag()) else None,
                    "records_last_poll": source.records_last_poll,
                    "key_rejected": source.key_rejected_at is not None,
                }
            )
    checks["sources"] = sources
    if replica.configured():
        checks["replica"] = replica.status_details()
    return JsonResponse({"ok": ok, **checks}, status=200 if ok else 503)


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """503 when the database is down, or when there are enabled sources and none of them is healthy: every
    one stale, failing or its key rejected (`Source.problem`, the banner's rule). With no enabled source
    there is nothing to ingest, and the answer is 200."""
    try:
        sources = list(Source.objects.enabled().order_by("name"))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return JsonResponse({"ready": False, "database": f"error: {type(exc).__name__}", "sources": []}, status=503)
    states = []
    for source in sources:
        problem = source.problem()
        states.append(
            {"name": source.name, "ok": problem is None, "problem": problem.public_summary if problem else ""}
        )
    ready = not states or any(state["ok"] for state in states)
    answer: dict[str, Any] = {"ready": ready, "database": "ok", "sources": states}
    if replica.configured():
        answer["replica"] = replica.status_details()
    return JsonResponse(answer, status=200 if ready else 503)
