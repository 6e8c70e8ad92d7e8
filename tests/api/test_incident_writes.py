"""Incident changes through the API: alerts.workflow, on the incident's timeline under the token's name."""

from __future__ import annotations

import pytest

from dashboard.alerts.models import IncidentEvent
from tests.api.conftest import World, bearer, token_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_acknowledge_note_and_resolve_are_audited_under_the_token(world: World) -> None:
    client = bearer(token_for(make_user("alice", staff=True), ["read", "act"], name="deploy-bot"))
    url = f"/api/v1/incidents/{world.incident.pk}"
    body = client.post(f"{url}/acknowledge").json()
    assert body["changed"] is True and body["incident"]["acknowledged_by"] == "alice (token deploy-bot)"
    assert client.post(f"{url}/acknowledge").json()["changed"] is False
    note = client.post(f"{url}/notes", {"text": "rolling back"}, content_type="application/json")
    assert note.status_code == 200
    resolved = client.post(f"{url}/resolve").json()
    assert resolved["changed"] is True
    assert resolved["incident"]["resolved_by"] == "alice (token deploy-bot)"
    assert client.post(f"{url}/resolve").json()["changed"] is False
    events = list(IncidentEvent.objects.filter(incident=world.incident).order_by("created_at", "pk")
                  .values_list("kind", "actor", "text"))
    assert ("acknowledged", "alice (token deploy-bot)", "") in events
    assert ("note", "alice (token deploy-bot)", "rolling back") in events


def test_a_session_change_is_audited_under_the_user(world: World) -> None:
    from django.test import Client

    client = Client()
    client.force_login(make_user("root", staff=True))
    client.post(f"/api/v1/incidents/{world.incident.pk}/acknowledge")
    world.incident.refresh_from_db()
    assert world.incident.acknowledged_by == "root"


@pytest.mark.parametrize("body", [{"text": ""}, {"text": "x" * 5001}, {}, {"note": "hi"}])
def test_a_bad_note_is_a_400(world: World, body: dict[str, object]) -> None:
    client = bearer(token_for(make_user("alice", staff=True), ["read", "act"]))
    response = client.post(f"/api/v1/incidents/{world.incident.pk}/notes", body, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert not IncidentEvent.objects.exists()


def test_assign_and_snooze_are_audited_under_the_token(world: World) -> None:
    client = bearer(token_for(make_user("alice", staff=True), ["read", "act"], name="deploy-bot"))
    url = f"/api/v1/incidents/{world.incident.pk}"

    def post(action: str, body: dict[str, object]) -> dict[str, object]:
        response = client.post(f"{url}/{action}", body, content_type="application/json")
        assert response.status_code == 200, response.content
        return response.json()

    body = post("assign", {"assignee": "alice"})
    assert body["changed"] is True and body["incident"]["assignee"] == "alice"  # type: ignore[index]
    assert post("assign", {"assignee": "alice"})["changed"] is False
    body = post("assign", {"assignee": None})
    assert body["changed"] is True and body["incident"]["assignee"] is None  # type: ignore[index]
    body = post("snooze", {"minutes": 60})
    assert body["changed"] is True and body["incident"]["snoozed_until"]  # type: ignore[index]
    body = post("snooze", {"minutes": None})
    assert body["changed"] is True and body["incident"]["snoozed_until"] is None  # type: ignore[index]
    assert post("snooze", {"minutes": None})["changed"] is False
    events = list(IncidentEvent.objects.filter(incident=world.incident).order_by("created_at", "pk")
                  .values_list("kind", "actor", "text"))
    assert events[0] == ("assigned", "alice (token deploy-bot)", "to alice")
    assert events[1] == ("assigned", "alice (token deploy-bot)", "unassigned")
    assert events[2][:2] == ("snoozed", "alice (token deploy-bot)") and events[2][2].startswith("until ")
    assert events[3] == ("unsnoozed", "alice (token deploy-bot)", "")


def test_a_resolved_incident_is_not_snoozed(world: World) -> None:
    client = bearer(token_for(make_user("alice", staff=True), ["read", "act"]))
    url = f"/api/v1/incidents/{world.incident.pk}"
    client.post(f"{url}/resolve")
    body = client.post(f"{url}/snooze", {"minutes": 60}, content_type="application/json").json()
    assert body["changed"] is False and body["incident"]["snoozed_until"] is None


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("assign", {"assignee": "vera"}),  # a viewer: not among the assignable staff
        ("assign", {"assignee": "nobody-here"}),
        ("assign", {"assignee": "al\x00ice"}),
        ("assign", {}),
        ("snooze", {"minutes": 17}),
        ("snooze", {}),
    ],
)
def test_a_bad_assignment_or_snooze_is_a_400(world: World, action: str, body: dict[str, object]) -> None:
    make_user("vera")
    client = bearer(token_for(make_user("alice", staff=True), ["read", "act"]))
    response = client.post(f"/api/v1/incidents/{world.incident.pk}/{action}", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert not IncidentEvent.objects.exists()
