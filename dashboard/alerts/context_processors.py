"""Open incidents on every page: the count in the navigation, the list at the top of the Overview and the
marks on the Streams page. `web` sits beside `alerts` and does not import it; its templates read this."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.http import HttpRequest

from dashboard.accounts.access import can_view_dashboard
from dashboard.alerts.models import Incident, TargetKind

# Open incidents read at most; the navigation says "N+" beyond. Open incidents are one per rule and target,
# so even a bad day stays far below this.
OPEN_SHOWN = 200


class OpenIncidents:
    """Read in one query (the partial index on open incidents), and only when a template first asks: a
    page that shows none of it, a live-refresh partial for one, costs nothing."""

    @cached_property
    def _rows(self) -> list[Incident]:
        return list(
            Incident.objects.open()
            .select_related("rule")
            .defer("details")
            .order_by("-opened_at", "-pk")[: OPEN_SHOWN + 1]
        )

    @property
    def rows(self) -> list[Incident]:
        return self._rows[:OPEN_SHOWN]

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def more(self) -> bool:
        return len(self._rows) > OPEN_SHOWN

    @cached_property
    def by_stream(self) -> dict[str, Incident]:
        """The newest open incident of each stream, for incidents targeting a stream or naming one."""
        found: dict[str, Incident] = {}
        for incident in self.rows:
            if incident.stream_id:
                found.setdefault(incident.stream_id, incident)
        return found

    @cached_property
    def by_stream_url(self) -> dict[str, dict[str, Incident]]:
        """The newest open incident of each webhook URL of each stream: one naming both (a stream's incident names
        its newest URL too), and under "" one targeting the URL itself, whichever streams send to it. Two streams
        may share a URL: one stream's incident is not the other's."""
        found: dict[str, dict[str, Incident]] = {}
        for incident in self.rows:
            if not incident.webhook_url:
                continue
            if incident.stream_id:
                found.setdefault(incident.stream_id, {}).setdefault(incident.webhook_url, incident)
            if incident.target_kind == TargetKind.WEBHOOK_URL:
                found.setdefault("", {}).setdefault(incident.webhook_url, incident)
        return found


def open_incidents(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not can_view_dashboard(user):
        return {}
    return {"incidents_open": OpenIncidents()}
