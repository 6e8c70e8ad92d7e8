"""Every answer of the API that a test receives, checked against the OpenAPI document the API serves: its status is
one the operation documents, and its JSON body validates against that status's schema (components resolved)."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from dashboard.api.urls import api

PREFIX = "/api/v1"


@cache
def _document() -> dict[str, Any]:
    return dict(api.get_openapi_schema(path_prefix=PREFIX + "/"))


@cache
def _operations() -> list[tuple[re.Pattern[str], str, dict[str, Any]]]:
    """(path pattern, method, operation) of every documented operation, the literal paths first."""
    found = []
    for path, item in _document()["paths"].items():
        pattern = re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "/?$")
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                found.append((pattern, method, operation))
    return sorted(found, key=lambda entry: entry[0].pattern.count("[^/]+"))


def check(method: str, path: str, status: int, content_type: str, body: bytes) -> None:
    """Raise AssertionError where the answer is not what the document says of it (a path the document does not
    name, such as the docs page or an unknown path's 404, is not checked)."""
    operation = next((op for pattern, m, op in _operations() if m == method.lower() and pattern.match(path)), None)
    if operation is None:
        return
    responses = operation.get("responses", {})
    documented = responses.get(status) or responses.get(str(status))
    assert documented is not None, f"{method} {path} answered {status}, which the document does not list"
    schema = (documented.get("content") or {}).get(content_type.split(";")[0].strip(), {}).get("schema")
    if schema is None or not body:
        return
    registry: Registry = Registry().with_resource("urn:api", Resource(_document(), specification=DRAFT202012))
    jsonschema.Draft202012Validator(_rebase(schema), registry=registry).validate(json.loads(body))


def _rebase(node: Any) -> Any:
    """A schema's local references (#/components/...) pointed at the whole document."""
    if isinstance(node, dict):
        return {k: ("urn:api" + v if k == "$ref" and isinstance(v, str) and v.startswith("#") else _rebase(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node
