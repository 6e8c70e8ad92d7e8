"""The README's API examples, run as written against a live server: every `curl` line of the chapter's code
block, with the token made on the tokens page and the placeholders filled from the data."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from tests.api.conftest import STREAM, World
from tests.conftest import make_user

README = Path(__file__).resolve().parents[2] / "README.md"


def examples() -> list[str]:
    chapter = README.read_text().split("\n## API\n", 1)[1].split("\n## ", 1)[0]
    block = chapter.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("curl ")]


def request_of(line: str, values: dict[str, str]) -> dict[str, Any]:
    """curl's -X, -H, -d and URL, with $VARIABLES and placeholders replaced."""
    for name, value in values.items():
        line = line.replace(name, value)
    words = shlex.split(line)[1:]
    method, headers, data, url = "GET", {}, None, ""
    while words:
        word = words.pop(0)
        if word == "-X":
            method = words.pop(0)
        elif word == "-H":
            name, _, value = words.pop(0).partition(": ")
            headers[name] = value
        elif word == "-d":
            data = words.pop(0)
        else:
            url = word
    return {"method": method, "url": url, "headers": headers, "content": data}


def test_the_readme_has_the_examples_the_issue_asks_for() -> None:
    lines = examples()
    assert 'curl -H "Authorization: Bearer $TOKEN" "$DASHBOARD/api/v1/deliveries?status=failing&limit=5"' in lines
    assert len(lines) >= 6


@pytest.mark.django_db(transaction=True)
def test_the_readme_examples_run_against_a_live_server(live_server: Any, world: World) -> None:
    from dashboard.alerts.models import Incident, IncidentEvent

    # The examples name incident 42.
    Incident.objects.filter(pk=world.incident.pk).update(id=42)
    page = Client()
    page.force_login(make_user("alice", staff=True))
    made = page.post("/account/tokens/", {"name": "readme", "scopes": ["read", "act"], "expires_in_days": "30"})
    token = re.search(r'id="token-secret">(sdt_[^<]+)<', made.content.decode()).group(1)  # type: ignore[union-attr]

    values = {"$DASHBOARD": live_server.url, "$TOKEN": token, "STREAM_ID": STREAM, "NEXT_CURSOR": ""}
    with httpx.Client(timeout=30) as client:
        for line in examples():
            if "NEXT_CURSOR" in line:
                first = client.get(f"{live_server.url}/api/v1/deliveries?status=failing&limit=5",
                                   headers={"Authorization": f"Bearer {token}"}).json()
                values["NEXT_CURSOR"] = first["next_cursor"] or ""
            response = client.request(**request_of(line, values))
            assert response.status_code == 200, (line, response.text)
            assert response.headers["content-type"].startswith("application/json")
    assert IncidentEvent.objects.filter(incident_id=42, actor="alice (token readme)", kind="note").exists()
    # The secret never goes into a URL: every example sends it in the header.
    assert all("$TOKEN" not in line.split('"$DASHBOARD')[-1] for line in examples())
