"""The provider's OpenAPI schemas as JSON Schema validators (OpenAPI 3.0 `nullable` made explicit)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

# The provider's published OpenAPI files (from its Python SDK), kept beside the tests so that the suite needs
# nothing outside the repository.
OPENAPI_DIR = Path(__file__).resolve().parent / "openapi"

# Keys the contract says real payloads carry beyond the published (older) payload schema, whose
# additionalProperties is false. They are validated as present-and-JSON, nothing more.
PAYLOAD_EXTRAS = {
    "erc20Transfers",
    "erc20Approvals",
    "nftTransfers",
    "nftApprovals",
    "nftTokenApprovals",
    "nativeBalances",
}


def _nullable_to_type(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _nullable_to_type(v) for k, v in node.items()}
        if node.pop("nullable", False):
            if "type" in node:
                node["type"] = (
                    [node["type"], "null"] if isinstance(node["type"], str) else node["type"] + ["null"]
                )
            elif "$ref" in node or "anyOf" in node:
                node = {"anyOf": [node, {"type": "null"}]}
        # OpenAPI's `example` values are not schema keywords; some are typed oddly (strings for booleans).
        node.pop("example", None)
        return node
    if isinstance(node, list):
        return [_nullable_to_type(v) for v in node]
    return node


def validator(openapi_file: str, schema_name: str) -> Draft202012Validator:
    document = _nullable_to_type(json.loads((OPENAPI_DIR / openapi_file).read_text()))
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    uri = f"urn:openapi:{openapi_file}"
    registry: Registry = Registry().with_resource(uri, resource)
    return Draft202012Validator({"$ref": f"{uri}#/components/schemas/{schema_name}"}, registry=registry)


def without_payload_extras(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    for record in body.get("result", []):
        payload = record.get("payload")
        if isinstance(payload, dict):
            for key in PAYLOAD_EXTRAS:
                payload.pop(key, None)
    return body


def operation_validator(
    openapi_file: str, path: str, method: str, status: str = "200"
) -> Draft202012Validator:
    """The schema of one operation's answer, as the paths section gives it (inline or by reference)."""
    document = _nullable_to_type(json.loads((OPENAPI_DIR / openapi_file).read_text()))
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    uri = f"urn:openapi:{openapi_file}"
    registry: Registry = Registry().with_resource(uri, resource)
    pointer = "/".join(
        part.replace("~", "~0").replace("/", "~1")
        for part in ("paths", path, method, "responses", status, "content", "application/json", "schema")
    )
    return Draft202012Validator({"$ref": f"{uri}#/{pointer}"}, registry=registry)
