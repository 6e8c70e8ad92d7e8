"""Every error as application/problem+json, the rate limit, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.api.urls import api
from tests.api.conftest import World, bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

PROBLEM_KEYS = {"type", "title", "status", "detail", "instance"}


@pytest.fixture
def client(db: None) -> Client:
    return bearer(token_for(make_user("ops", staff=True), ["read", "act"]))


def _problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert PROBLEM_KEYS <= set(body)
    assert body["status"] == status
    return body


@pytest.mark.parametrize(
    "url", ["/api/v1/deliveries?limitt=5", "/api/v1/streams?x=1", "/api/v1/incidents?after=abc",
            "/api/v1/error-groups?streams=abc"],
)
def test_an_unknown_parameter_is_refused_by_name(client: Client, url: str) -> None:
    body = _problem(client.get(url), 400)
    name = url.split("?")[1].split("=")[0]
    assert name in body["detail"]
    assert body["type"].endswith(":unknown-parameter")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/api/v1/deliveries?status=nope", "Status"),
        ("/api/v1/deliveries?limit=100000", "limit"),
        ("/api/v1/deliveries?cursor=zzz", "page link"),
        ("/api/v1/deliveries?range=custom", "custom range"),
        ("/api/v1/incidents?cursor=zzz", "cursor"),
        ("/api/v1/incidents?state=sleeping", "state"),
    ],
)
def test_a_bad_parameter_is_a_400_saying_what(client: Client, url: str, says: str) -> None:
    body = _problem(client.get(url), 400)
    assert says in body["detail"] + " ".join(body.get("errors") or [])


def test_401_without_a_token_or_with_a_bad_one(db: None) -> None:
    for client in (Client(), bearer("sdt_wrong"), Client(HTTP_AUTHORIZATION="Basic abc")):
        response = client.get("/api/v1/streams")
        _problem(response, 401)
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_no_answer_is_cached(client: Client, world: World) -> None:
    for url in ("/api/v1/streams", f"/api/v1/incidents/{world.incident.pk}", "/api/v1/nothing"):
        assert "no-store" in client.get(url)["Cache-Control"]


def test_404_405_and_unknown_paths(client: Client, world: World) -> None:
    _problem(client.get("/api/v1/incidents/999999"), 404)
    _problem(client.get("/api/v1/deliveries/00000000-0000-0000-0000-000000000000"), 404)
    _problem(client.get("/api/v1/no-such-thing"), 404)
    response = client.delete("/api/v1/streams")
    body = _problem(response, 405)
    assert response["Allow"] == "GET" and "DELETE" in body["detail"]
    _problem(client.get(f"/api/v1/incidents/{world.incident.pk}/resolve"), 405)


def test_500_says_nothing_of_the_error(client: Client, monkeypatch: Any) -> None:
    def broken(now: Any) -> Any:
        raise RuntimeError("password=hunter2 at line 7")

    monkeypatch.setattr("dashboard.api.streams.stream_entries", broken)
    response = client.get("/api/v1/streams")
    body = _problem(response, 500)
    assert "hunter2" not in response.content.decode() and "Traceback" not in response.content.decode()
    assert "request id" in body["detail"]


def test_the_rate_limit_answers_429_with_retry_after(db: None, settings: Any) -> None:
    settings.API_RATE_PER_MINUTE = 3
    user = make_user("ops", staff=True)
    first, second = bearer(token_for(user, ["read"], name="a")), bearer(token_for(user, ["read"], name="b"))
    assert [first.get("/api/v1/incidents").status_code for _ in range(3)] == [200, 200, 200]
    response = first.get("/api/v1/incidents")
    _problem(response, 429)
    assert 1 <= int(response["Retry-After"]) <= 60
    # Per token: another token of the same user still has its own minute.
    assert second.get("/api/v1/incidents").status_code == 200


def test_the_rate_limit_lives_in_redis(db: None, settings: Any) -> None:
    from django.core.cache import caches

    cache = caches["default"]
    assert type(cache).__name__ == "RedisCache"
    client = bearer(token_for(make_user(), ["read"]))
    assert client.get("/api/v1/incidents").status_code == 200
    keys = cache._cache.get_client().keys("*api-rate:token:*")  # type: ignore[attr-defined]
    assert len(keys) == 1


def test_the_openapi_document_is_valid_3_1(client: Client) -> None:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    from jsonschema import Draft202012Validator

    for path, methods in document["paths"].items():
        assert path.startswith("/api/v1/")
        for method, operation in methods.items():
            assert method in {"get", "post", "patch", "delete"}
            responses = operation["responses"]
            assert ("204" if method == "delete" else "200") in responses, (path, method)
            for status in ("400", "401", "403", "404", "429", "500"):
                assert responses[status]["content"]["application/problem+json"]["schema"] == {
                    "$ref": "#/components/schemas/Problem"
                }
            assert operation["security"], (path, method)
    schemas = document["components"]["schemas"]
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    text = response.content.decode()
    for ref in set(__import__("re").findall(r'"\$ref":\s*"#/components/schemas/([^"]+)"', text)):
        assert ref in schemas, ref
    assert set(document["components"]["securitySchemes"]) >= {"TokenOrSession"}
    assert api.get_openapi_schema(path_prefix="/api/v1/")["openapi"] == document["openapi"]
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation import OpenAPIV31SpecValidator

    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_docs_need_a_login(db: None) -> None:
    assert Client().get("/api/v1/docs").status_code == 302
    assert Client().get("/api/v1/openapi.json").status_code == 302
    viewer = Client()
    viewer.force_login(make_user("vera"))
    page = viewer.get("/api/v1/docs")
    assert page.status_code == 200
    # Served from the dashboard's own static files: the CSP allows scripts from no other host.
    assert b"/static/ninja/swagger-ui-bundle" in page.content and b"cdn." not in page.content
    # A session's POST from the docs carries the CSRF token.
    assert b'data-api-csrf="true"' in page.content
    nobody = Client()
    nobody.force_login(make_user("nobody", role=None))
    assert nobody.get("/api/v1/docs").status_code == 403
    _problem(bearer("sdt_nope").get("/api/v1/openapi.json"), 401)


@pytest.mark.parametrize("path", ["/api/v1/actions?stream=a%00b", "/api/v1/deliveries?tag=%00",
                                  "/api/v1/streams?cursor=%00"])
def test_a_nul_in_a_parameter_is_a_400_naming_it(client: Client, path: str) -> None:
    body = _problem(client.get(path), 400)
    assert "NUL character" in body["detail"] and path.split("?")[1].split("=")[0] in body["detail"]
