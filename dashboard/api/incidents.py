"""Incidents: the list and one incident with its timeline (read); acknowledge, assign, note, snooze and resolve (scope `act`,
the staff role as on the incident page), through `alerts.workflow` and written to the timeline under the
caller's name, "alice (token deploy-bot)" for a token."""


from typing import Any

from django.db.models import Q
from django.http import Http404, HttpRequest
from ninja import Query, Router

from dashboard.alerts import workflow
from dashboard.alerts.forms import AssignForm, NoteForm, SnoozeForm, assignable_users
from dashboard.alerts.models import Incident
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, int_cursor, next_url, read_int_cursor
from dashboard.api.problems import Problem, bad_parameters, refuse_unknown
from dashboard.api.schemas import AssignIn, ChangeOut, IncidentDetail, IncidentPage, NoteIn, SnoozeIn
from dashboard.api.security import allow
from dashboard.api.tokens import MANAGE, VIEW

router = Router(tags=["incidents"])


def _row(incident: Incident) -> dict[str, Any]:
    return {
        "id": incident.pk, "rule": incident.rule.name, "summary": incident.summary,
        "target_kind": incident.target_kind, "target_key": incident.target_key, "stream_id": incident.stream_id,
        "webhook_url": incident.webhook_url, "opened_at": incident.opened_at, "resolved_at": incident.resolved_at,
        "resolved_by": incident.resolved_by, "acknowledged_at": incident.acknowledged_at,
        "acknowledged_by": incident.acknowledged_by,
        "assignee": incident.assignee.get_username() if incident.assignee is not None else None,
        "snoozed_until": incident.snoozed_until,
    }


def _detail(incident_id: int) -> dict[str, Any]:
    incident = Incident.objects.select_related("rule", "assignee").filter(pk=incident_id).first()
    if incident is None:
        raise Http404("No incident with this id.")
    return {
        **_row(incident),
        "details": incident.details if isinstance(incident.details, dict) else {},
        "events": list(incident.events.order_by("created_at", "pk")[:500]),
    }


def _incident(incident_id: int) -> Incident:
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        raise Http404("No incident with this id.")
    return incident


@router.get("/incidents", response=IncidentPage, summary="Incidents, newest first")
def incident_list(
    request: HttpRequest,
    state: str = Query("", pattern="^(|open|resolved)$", description="`open` or `resolved` (default: both)"),
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, ["state", "limit", "cursor"])
    qs = Incident.objects.select_related("rule", "assignee").order_by("-opened_at", "-id")
    if state:
        qs = qs.filter(resolved_at__isnull=state == "open")
    position = read_int_cursor(cursor)
    if position is not None:
        opened, pk = position
        qs = qs.filter(Q(opened_at__lt=opened) | Q(opened_at=opened, id__lt=pk))
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = int_cursor(rows[-1].opened_at, rows[-1].pk) if rows and more else None
    return {"items": [_row(r) for r in rows], "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.get("/incidents/{int:incident_id}", response=IncidentDetail, summary="One incident and its timeline")
def incident_detail(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [])
    return _detail(incident_id)


@router.post("/incidents/{int:incident_id}/acknowledge", response=ChangeOut, summary="Acknowledge an incident")
def acknowledge(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    caller = allow(request, MANAGE)
    refuse_unknown(request, [])
    changed = workflow.acknowledge(_incident(incident_id), by=caller.actor)
    return {"changed": changed, "incident": _detail(incident_id)}


@router.post("/incidents/{int:incident_id}/notes", response=ChangeOut, summary="Add a note to an incident")
def add_note(request: HttpRequest, incident_id: int, note: NoteIn) -> dict[str, Any]:
    caller = allow(request, MANAGE)
    refuse_unknown(request, [])
    incident = _incident(incident_id)
    # The incident page's form: the same limits on a note.
    form = NoteForm({"text": note.text})
    if not form.is_valid():
        raise bad_parameters(form)
    workflow.add_note(incident, form.cleaned_data["text"], by=caller.actor)
    return {"changed": True, "incident": _detail(incident_id)}


@router.post("/incidents/{int:incident_id}/resolve", response=ChangeOut, summary="Resolve an incident by hand")
def resolve(request: HttpRequest, incident_id: int) -> dict[str, Any]:
    caller = allow(request, MANAGE)
    refuse_unknown(request, [])
    changed = workflow.resolve([_incident(incident_id)], by=caller.actor) > 0
    return {"changed": changed, "incident": _detail(incident_id)}


@router.post("/incidents/{int:incident_id}/assign", response=ChangeOut, summary="Assign an incident, or unassign it")
def assign(request: HttpRequest, incident_id: int, body: AssignIn) -> dict[str, Any]:
    """To an active staff member by user name (the incident page's list), or to nobody with `null`. Assigning
    to whom it is assigned already answers `changed: false`."""
    caller = allow(request, MANAGE)
    refuse_unknown(request, [])
    incident = _incident(incident_id)
    assignee = None
    if body.assignee is not None:
        name = body.assignee.replace("\x00", "")[:150]
        assignee = assignable_users().filter(username=name).first() if name == body.assignee else None
        if assignee is None:
            raise Problem(400, "Assign the incident to an active staff member (a user name), or to nobody (null).",
                          kind="invalid-parameter")
    # The incident page's form: the same choice of assignees.
    form = AssignForm({"assignee": assignee.pk if assignee is not None else ""})
    if not form.is_valid():
        raise bad_parameters(form)
    changed = workflow.assign(incident, form.cleaned_data["assignee"], by=caller.actor)
    return {"changed": changed, "incident": _detail(incident_id)}


@router.post("/incidents/{int:incident_id}/snooze", response=ChangeOut, summary="Snooze an incident, or end a snooze")
def snooze(request: HttpRequest, incident_id: int, body: SnoozeIn) -> dict[str, Any]:
    """Leaves an open incident out of digests until `snoozed_until`; `minutes: null` ends a snooze. Snoozing a
    resolved incident, or ending a snooze that is not running, answers `changed: false`."""
    caller = allow(request, MANAGE)
    refuse_unknown(request, [])
    incident = _incident(incident_id)
    if body.minutes is None:
        changed = workflow.unsnooze(incident, by=caller.actor)
        return {"changed": changed, "incident": _detail(incident_id)}
    form = SnoozeForm({"minutes": str(body.minutes)})
    if not form.is_valid():
        raise bad_parameters(form)
    until = workflow.snooze(incident, form.cleaned_data["minutes"], by=caller.actor)
    return {"changed": until is not None, "incident": _detail(incident_id)}
