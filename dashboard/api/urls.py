"""/api/v1/: the NinjaAPI with its routers, problem answers for every error (unknown paths and methods
included), and the OpenAPI document and docs behind a login."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.http.response import HttpResponseBase
from django.urls import URLPattern, include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI

from dashboard.api import (
    actions,
    alert_rules,
    channels,
    completeness,
    deliveries,
    error_groups,
    incidents,
    maintenance_windows,
    problems,
    retries,
    streams,
    timelines,
)
from dashboard.api.security import PerTokenThrottle, TokenOrSession, docs_access

ERROR_STATUSES = {
    400: "Bad or unknown parameters",
    401: "No token, or a bad one (`WWW-Authenticate: Bearer`)",
    403: "The token lacks the scope, or its user the permission (named in `detail`)",
    404: "Not found",
    429: "Rate limit (`Retry-After`)",
    500: "Internal error (the request id only)",
}


class DashboardApi(NinjaAPI):
    """Every operation's document also lists the problem answers it may give, as `application/problem+json`."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components["Problem"] = problems.ProblemOut.model_json_schema(ref_template="#/components/schemas/{model}")
        content = {problems.CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for methods in schema["paths"].values():
            for operation in methods.values():
                for status, description in ERROR_STATUSES.items():
                    operation["responses"].setdefault(status, {"description": description, "content": content})
        return schema


api = DashboardApi(
    title="Stream Dashboard API",
    version="1",
    description="Deliveries, streams, error groups and incidents of the dashboard, for scripts. "
    "Authenticate with `Authorization: Bearer <token>` (tokens: /account/tokens/). Errors are "
    "`application/problem+json` (RFC 9457).",
    auth=TokenOrSession(),
    throttle=[PerTokenThrottle()],
    urls_namespace="api",
    openapi_url="/openapi.json",
    docs_url="/docs",
    docs_decorator=docs_access,
)
problems.install(api)
for module in (deliveries, streams, error_groups, incidents, actions, timelines, retries, completeness,
               alert_rules, channels, maintenance_windows):
    api.add_router("", module.router)


def _api_view(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A method the path does not take answers a problem too; no answer is kept by a cache (they hold what
    a token may read)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = problems.problem_response(
                request, 405, f"{request.method} is not allowed here; use {allowed}.",
                headers={"Allow": allowed},
            )
        response.setdefault("Cache-Control", "private, no-store")
        return response

    return wrapped


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    return problems.problem_response(request, 404, "No such endpoint; see /api/v1/docs.", kind="not-found")


patterns, _app_name, _namespace = api.urls
for pattern in patterns:
    if isinstance(pattern, URLPattern):
        pattern.callback = _api_view(pattern.callback)
urlpatterns = [path("", include((patterns, "api"), namespace="api")), re_path(r"^(?P<rest>.*)$", not_found)]
