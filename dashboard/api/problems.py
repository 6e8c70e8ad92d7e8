"""Every error of the API as `application/problem+json` (RFC 9457): type, title, status, detail, instance.

No answer carries a stack trace, a query or a secret: an unexpected error is logged with the request id and
answered with that id only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import orjson
from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from dashboard.log_context import REQUEST_ID
from dashboard.text import visible
from dashboard.web.forms import form_errors

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/problem+json"
# The problem types this API names; README, API, lists them. Generic statuses use "about:blank".
TYPE_PREFIX = "urn:stream-dashboard:problem:"


class ProblemOut(Schema):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[str] | None = None


class Problem(Exception):
    def __init__(
        self, status: int, detail: str, *, kind: str = "", errors: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind
        self.errors = errors
        self.headers = headers or {}


def problem_response(
    request: HttpRequest, status: int, detail: str, *, kind: str = "", errors: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + kind if kind else "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.path,
    }
    if errors:
        body["errors"] = errors
    response = HttpResponse(orjson.dumps(body), status=status, content_type=CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    response["Cache-Control"] = "no-store"
    return response


def bad_parameters(form: forms.Form) -> Problem:
    return Problem(400, "Some query parameters are not valid.", kind="invalid-parameter", errors=form_errors(form))


def refuse_unknown(request: HttpRequest, known: Iterable[str]) -> None:
    """A parameter the endpoint does not know is refused by name, not ignored: a typo would otherwise widen
    the answer silently."""
    unknown = sorted(set(request.GET) - set(known))
    if unknown:
        names = ", ".join(visible(name)[:60] for name in unknown[:10])
        raise Problem(400, f"Unknown query parameter: {names}.", kind="unknown-parameter")
    # No stored text holds a NUL, and Postgres refuses one in a query: said here, for every parameter, not as a 500.
    nul = sorted(name for name, values in request.GET.lists() if any("\x00" in value for value in values))
    if nul:
        raise Problem(400, f"{visible(nul[0])[:60]}: a NUL character (U+0000) is not allowed.",
                      kind="invalid-parameter")


def unauthorized(request: HttpRequest, detail: str) -> HttpResponse:
    return problem_response(
        request, 401, detail, kind="unauthenticated",
        headers={"WWW-Authenticate": 'Bearer realm="api"'},
    )


def install(api: NinjaAPI) -> None:
    def on_problem(request: HttpRequest, exc: Problem) -> HttpResponse:
        return problem_response(
            request, exc.status, exc.detail, kind=exc.kind, errors=exc.errors, headers=exc.headers
        )

    def on_authentication(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        detail = exc.message if exc.message != "Unauthorized" else (
            "Authentication required: send `Authorization: Bearer <token>`, or log in."
        )
        return unauthorized(request, detail)

    def on_throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
        return problem_response(request, 429, "Too many requests for this token; wait for Retry-After.",
                                kind="rate-limited")

    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        return problem_response(request, exc.status_code, str(exc))

    def on_not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
        return problem_response(request, 404, str(exc) or "Not found.", kind="not-found")

    def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        lines = []
        for error in exc.errors:
            where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "request"
            lines.append(visible(f"{where}: {error.get('msg', 'invalid')}")[:300])
        return problem_response(
            request, 400, "Some parameters are not valid.", kind="invalid-parameter", errors=lines
        )

    def on_exception(request: HttpRequest, exc: Exception) -> HttpResponse:
        logger.exception("API error at %s", request.path)
        return problem_response(
            request, 500, f"Internal error; quote request id {REQUEST_ID.get() or 'unknown'}.", kind="internal"
        )

    handlers: list[tuple[type[Exception], Any]] = [
        (Problem, on_problem),
        (AuthenticationError, on_authentication),
        (Throttled, on_throttled),
        (HttpError, on_http_error),
        (Http404, on_not_found),
        (ValidationError, on_validation),
        (Exception, on_exception),
    ]
    for exc_class, handler in handlers:
        api.add_exception_handler(exc_class, handler)
