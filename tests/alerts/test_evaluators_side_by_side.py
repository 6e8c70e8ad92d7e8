"""Two evaluators at once (the sweep beside a poll's evaluation): an incident one of them sees holding again is
not resolved by the other's older reading, and one resolved under an evaluator's feet reopens at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dashboard.alerts import evaluate
from dashboard.alerts.models import Incident
from tests.alerts.factories import failures, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db


def test_a_resolution_read_before_the_condition_held_again_does_not_close_the_incident() -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(window_minutes=1, grace_minutes=0, cooldown_minutes=0)
    failures(source, now, 1)
    evaluate.evaluate_all(now)
    incident = Incident.objects.get()
    # The sweep sees the window clear and reads the incident to resolve it...
    later = now + timedelta(minutes=2)
    evaluate.evaluate_all(later)
    stale = Incident.objects.get(pk=incident.pk)
    assert stale.clear_since == later and stale.is_open
    # ...while a poll stores a new failure and its evaluation sees the condition hold again.
    failures(source, later + timedelta(seconds=5), 1)
    evaluate.evaluate_rule(rule, later + timedelta(seconds=6))
    assert evaluate.resolve_incident(stale, later + timedelta(seconds=7), cleared=True) is None
    assert Incident.objects.get().is_open


def test_an_incident_resolved_since_it_was_read_opens_a_new_one_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    now = fixed_now()
    source = make_source()
    rule = make_rule(window_minutes=1, grace_minutes=0, cooldown_minutes=0)
    failures(source, now, 1)
    evaluate.evaluate_all(now)
    first = Incident.objects.get()
    later = now + timedelta(minutes=2)
    failures(source, later, 1)
    read = list(rule.incidents.open())
    # The other evaluator resolves it between this one's reading and its update.
    Incident.objects.filter(pk=first.pk).update(resolved_at=later)

    class StaleRead:
        def open(self) -> list[Any]:
            return read

    monkeypatch.setattr(type(rule), "incidents", property(lambda self: StaleRead()))
    evaluate.evaluate_rule(rule, later + timedelta(seconds=1))
    monkeypatch.undo()
    assert Incident.objects.filter(resolved_at__isnull=True).exclude(pk=first.pk).count() == 1
