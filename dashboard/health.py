"""Health endpoint for load balancers and uptime checks: database, Redis and sync state, no secrets."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from dashboard.polling.locks import redis_client
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
                    "problem": problem.summary if problem else "",
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
    return JsonResponse({"ok": ok, **checks}, status=200 if ok else 503)
