"""What the admin asks of a change and writes after it, for the endpoints that change what the admin changes
(alert rules, channels, maintenance windows): the model's admin permission (`alerts.change_alertrule`, …) on
top of the token's scope `admin`; the admin's form (and through it the model's `clean`); and the admin's
history (`LogEntry`, with the admin's action flag and change message) naming the token."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from django import forms
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import construct_change_message
from django.db import models, transaction
from django.forms.models import model_to_dict
from django.http import HttpRequest

from dashboard.api.models import ADMIN
from dashboard.api.pages import key_cursor, next_url, read_key_cursor
from dashboard.api.problems import Problem
from dashboard.api.tokens import Caller, Need
from dashboard.text import visible

ERROR_LINE_LIMIT = 300


def admin_need(model: type[models.Model], action: str) -> Need:
    """Scope `admin`, and what the admin checks for `action` (view, add, change, delete) on the model: an
    active staff member holding the model's permission."""
    meta = model._meta
    permission = f"{meta.app_label}.{action}_{meta.model_name}"

    def check(user: Any) -> bool:
        return bool(user.is_active and user.is_staff and user.has_perm(permission))

    return Need(ADMIN, check, f"the admin's permission {permission} (staff)")


def form_data(
    form_class: type[forms.ModelForm], instance: models.Model | None, given: Mapping[str, Any],
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The admin form's data: the body's fields over the object's values, or a new object's defaults; `names`
    renames the body's fields to the form's. Related objects by id."""
    fields = form_class._meta.fields  # type: ignore[attr-defined]
    model = form_class._meta.model  # type: ignore[attr-defined]
    data = model_to_dict(instance if instance is not None else model(), fields=fields)
    data = {k: [o.pk for o in v] if isinstance(v, list) else v for k, v in data.items()}
    for name, value in given.items():
        data[(names or {}).get(name, name)] = value
    return {k: "" if v is None else v for k, v in data.items()}


def name_cursor(cursor: str) -> str | None:
    """The name after which a list by name goes on (`pages.key_cursor`); one no name can follow is refused."""
    after = read_key_cursor(cursor)
    if after is not None and "\x00" in after:
        raise Problem(400, "cursor: this cursor is not valid; start again without it.", kind="invalid-parameter")
    return after


def page_by_name(
    request: HttpRequest, qs: models.QuerySet[Any], limit: int, cursor: str, out: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """A page of `qs` by name, after the cursor's name: its items (`out` of each row), the next cursor and link."""
    after = name_cursor(cursor)
    if after is not None:
        qs = qs.filter(name__gt=after)
    rows = list(qs.order_by("name")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = key_cursor(rows[-1].name) if rows and more else None
    return {"items": [out(row) for row in rows], "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


def checked(form: forms.BaseForm, names: Mapping[str, str] | None = None) -> None:
    """A 400 listing every error of the admin's form by field ("window_minutes: …"); `names` renames the form's
    fields to the body's."""
    if form.is_valid():
        return
    lines = []
    for name, errors in form.errors.items():
        label = "" if name == "__all__" else f"{(names or {}).get(name, name)}: "
        for error in errors:
            line = visible(f"{label}{error}")
            lines.append(line if len(line) <= ERROR_LINE_LIMIT else line[: ERROR_LINE_LIMIT - 1] + "…")
    raise Problem(400, "Some fields are not valid.", kind="invalid-parameter", errors=lines)


def _through(caller: Caller) -> str:
    return f"Through the API by {caller.actor}."


def log_addition(caller: Caller, obj: models.Model, form: forms.ModelForm) -> None:
    _log(caller, obj, ADDITION, construct_change_message(cast(forms.Form, form), [], True))


def log_change(caller: Caller, obj: models.Model, form: forms.ModelForm) -> None:
    _log(caller, obj, CHANGE, construct_change_message(cast(forms.Form, form), [], False))


def save_added(caller: Caller, form: forms.ModelForm) -> Any:
    """The form's new object saved, and its addition in the admin's history, in one transaction."""
    with transaction.atomic():
        obj = form.save()
        log_addition(caller, obj, form)
    return obj


def save_changed(caller: Caller, form: forms.ModelForm) -> Any:
    """The form's object saved, and its change (if any) in the admin's history, in one transaction."""
    with transaction.atomic():
        obj = form.save()
        if form.has_changed():
            log_change(caller, obj, form)
    return obj


def delete_logged(caller: Caller, obj: models.Model) -> None:
    """The object deleted, its deletion in the admin's history first, in one transaction."""
    with transaction.atomic():
        log_deletion(caller, obj)
        obj.delete()


def log_deletion(caller: Caller, obj: models.Model) -> None:
    """Before the deletion, as the admin does (the entry names the object's id and text)."""
    _log(caller, obj, DELETION, [])


def _log(caller: Caller, obj: models.Model, flag: int, message: list[dict[str, Any]]) -> None:
    # The admin's message in words ("Changed Enabled and Window minutes."), then who through which token; a
    # message of the admin's JSON form has no room for the token.
    said = LogEntry(change_message=json.dumps(message)).get_change_message() if flag != DELETION else "Deleted."
    LogEntry.objects.log_actions(
        user_id=caller.user.pk, queryset=[obj], action_flag=flag,
        change_message=f"{said or 'No fields changed.'} {_through(caller)}", single_object=True,
    )
