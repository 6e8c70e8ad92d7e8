"""Maintenance windows: list, create, delete (scope `admin`, the admin's permissions on maintenance windows),
checked by the admin's form (`expectations.forms.MaintenanceWindowForm`, the model's `clean`: the cron
expression, the zone, one-off or recurring) and written to the admin's history under the token's name."""

from typing import Any

from django.db import transaction
from django.http import Http404, HttpRequest
from ninja import Query, Router, Status

from dashboard.api import administration
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, key_cursor, next_url, read_key_cursor
from dashboard.api.problems import Problem, refuse_unknown
from dashboard.api.schemas import MaintenanceWindowIn, MaintenanceWindowOut, MaintenanceWindowPage
from dashboard.api.security import allow
from dashboard.expectations.forms import MaintenanceWindowForm
from dashboard.expectations.models import MaintenanceWindow

router = Router(tags=["maintenance windows"])

VIEW = administration.admin_need(MaintenanceWindow, "view")
ADD = administration.admin_need(MaintenanceWindow, "add")
DELETE = administration.admin_need(MaintenanceWindow, "delete")


def _out(window: MaintenanceWindow) -> dict[str, Any]:
    fields = {name: getattr(window, name) for name in MaintenanceWindowOut.model_fields if name != "schedule"}
    return {**fields, "schedule": window.describe_schedule()}


@router.get("/maintenance-windows", response=MaintenanceWindowPage, summary="Maintenance windows, oldest first")
def window_list(
    request: HttpRequest,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=200, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    qs = MaintenanceWindow.objects.order_by("pk")
    after = read_key_cursor(cursor)
    if after is not None:
        if not after.isdigit():
            raise Problem(400, "cursor: this cursor is not valid; start again without it.", kind="invalid-parameter")
        qs = qs.filter(pk__gt=int(after))
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = key_cursor(str(rows[-1].pk)) if rows and more else None
    return {"items": [_out(w) for w in rows], "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.post("/maintenance-windows", response=MaintenanceWindowOut, summary="Create a maintenance window")
def window_create(request: HttpRequest, body: MaintenanceWindowIn) -> dict[str, Any]:
    caller = allow(request, ADD)
    refuse_unknown(request, [])
    form = MaintenanceWindowForm(
        administration.form_data(MaintenanceWindowForm, None, body.model_dump(exclude_unset=True))
    )
    administration.checked(form)
    with transaction.atomic():
        window = form.save(commit=False)
        window.created_by = caller.actor[:150]
        window.save()
        administration.log_addition(caller, window, form)
    return _out(window)


@router.delete("/maintenance-windows/{int:maintenance_window_id}", response={204: None},
               summary="Delete a maintenance window")
def window_delete(request: HttpRequest, maintenance_window_id: int) -> Status[None]:
    caller = allow(request, DELETE)
    refuse_unknown(request, [])
    window = MaintenanceWindow.objects.filter(pk=maintenance_window_id).first()
    if window is None:
        raise Http404("No maintenance window with this id.")
    administration.delete_logged(caller, window)
    return Status(204, None)
