"""An incident's timeline: opened, what people did (acknowledged, assigned, notes, snoozes), the replays and
other actions at the provider on its stream while it was open, and its resolution."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from dashboard.actions.models import ActionState, ProviderAction
from dashboard.alerts.models import Incident


@dataclass(frozen=True)
class Entry:
    at: datetime
    what: str
    actor: str = ""
    text: str = ""
    url: str = ""


def timeline(incident: Incident, now: datetime | None = None) -> list[Entry]:
    now = now or timezone.now()
    entries = [Entry(incident.opened_at, "Opened", text=incident.summary)]
    entries += [Entry(e.created_at, e.get_kind_display(), e.actor, e.text) for e in incident.events.all()]
    if incident.stream_id:
        actions = (
            ProviderAction.objects.requested()
            .for_stream(incident.stream_id)
            .filter(created_at__gte=incident.opened_at, created_at__lte=incident.resolved_at or now)
            .exclude(state=ActionState.CANCELLED)
        )
        for action in actions:
            outcome = action.get_state_display().lower()
            entries.append(
                Entry(
                    action.finished_at or action.created_at,
                    f"{action.get_kind_display()} ({outcome})",
                    action.requested_by_name,
                    action.answer or action.scope,
                    action.get_absolute_url(),
                )
            )
    if incident.resolved_at is not None:
        entries.append(
            Entry(incident.resolved_at, "Resolved", incident.resolved_by, "" if incident.resolved_by else "condition clear")
        )
    return sorted(entries, key=lambda e: e.at)
