"""Prometheus metrics of the requests sent upstream, recorded by the transport (`client._fetch`) alone.

In multi-process mode (PROMETHEUS_MULTIPROC_DIR, see README) each process writes its own files and the
web process's `/metrics` adds them up.
"""

from __future__ import annotations

import re

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "dashboard_upstream_requests",
    "Requests sent to the provider, by source, operation and answer (2xx, 4xx, 429, 5xx, or error: no answer).",
    ["source", "operation", "status_class"],
)
LATENCY = Histogram(
    "dashboard_upstream_request_duration_seconds",
    "Time from sending a request to the provider to the last byte of its answer (or the failure).",
    ["source", "operation"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)

# A path segment kept as it is: a word such as "history", "streams", "block-to-webhook". Anything else (ids,
# addresses, chain and block numbers) becomes {id}, so the operation label stays a short, fixed list.
_WORD = re.compile(r"[a-z][a-z0-9_-]{0,30}")


def operation(method: str, path: str) -> str:
    """`GET /history`, `POST /history/replay/{id}/{id}`: the request with its variable parts masked."""
    segments = [s if _WORD.fullmatch(s) else "{id}" for s in path.split("?")[0].strip("/").split("/") if s]
    return f"{method} /" + "/".join(segments)


def status_class(status: int | None) -> str:
    if status is None:
        return "error"
    if status == 429:
        return "429"
    return f"{status // 100}xx"


def observe(source: str, method: str, path: str, status: int | None, seconds: float) -> None:
    name = operation(method, path)
    REQUESTS.labels(source=source, operation=name, status_class=status_class(status)).inc()
    LATENCY.labels(source=source, operation=name).observe(seconds)
