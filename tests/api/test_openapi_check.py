"""The check every API test's answers go through (tests/api/openapi_check.py) catches what it is there to catch."""

from __future__ import annotations

import jsonschema
import pytest

from tests.api import openapi_check


def test_an_undocumented_status_or_a_body_outside_its_schema_is_caught() -> None:
    with pytest.raises(AssertionError, match="does not list"):
        openapi_check.check("GET", "/api/v1/streams", 418, "application/json", b"{}")
    with pytest.raises(jsonschema.ValidationError):
        openapi_check.check("GET", "/api/v1/streams", 200, "application/json", b'{"items": "not a list"}')
    with pytest.raises(jsonschema.ValidationError):
        openapi_check.check("GET", "/api/v1/incidents", 401, "application/problem+json", b'{"detail": 3}')
    # A path the document does not name (the docs page) is not checked.
    openapi_check.check("GET", "/api/v1/docs", 200, "text/html", b"<html>")
