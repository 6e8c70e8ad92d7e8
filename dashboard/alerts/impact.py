"""The true impact of an incident: what is failing now, what failed in it so far, what is still on the
provider's retry schedule and what was given up, with the first and last failure. Opening and resolution
messages (mail and channels), the digest and the incident page all read it here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.dateparse import parse_datetime

from dashboard.alerts.models import Incident, TargetKind


@dataclass(frozen=True)
class Impact:
    # The incident's period: from the window the condition looked at when it opened, to its resolution.
    since: datetime
    until: datetime | None
    # Still failing, with an attempt in the period: on the retry schedule, or given up.
    retrying: int
    given_up: int
    # Failed in the period and delivered since.
    recovered: int
    first_failure: datetime | None
    last_failure: datetime | None
    # When the figures were read.
    at: datetime

    @property
    def failing_now(self) -> int:
        return self.retrying + self.given_up

    @property
    def failed(self) -> int:
        """Failed in the incident so far: still failing or recovered."""
        return self.failing_now + self.recovered


def incident_start(incident: Incident) -> datetime:
    since = incident.details.get("since") if isinstance(incident.details, dict) else None
    parsed = parse_datetime(since) if isinstance(since, str) else since if isinstance(since, datetime) else None
    return parsed or incident.opened_at - timedelta(minutes=incident.rule.window_minutes)


def incident_impact(incident: Incident, now: datetime) -> Impact | None:
    """None for an incident about a source (polling), which has no deliveries of its own."""
    if incident.target_kind == TargetKind.SOURCE:
        return None
    since = incident_start(incident)
    figures = incident.deliveries().failure_impact(since, incident.resolved_at)
    return Impact(since=since, until=incident.resolved_at, at=now, **figures)
