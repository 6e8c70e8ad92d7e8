"""Error groups: the Error groups page's rows (`web.views.errors.error_group_entries`, filtered by its form,
`ErrorGroupsForm`): the groups failing in a window, most failures first, with where they happened."""

from typing import Any

from django.db.models import Sum
from django.http import Http404, HttpRequest, QueryDict
from ninja import Field, Query, Router, Schema
from pydantic import create_model

from dashboard import visibility
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, int_cursor, next_url, on_replica, read_int_cursor
from dashboard.api.problems import Problem, bad_parameters, refuse_unknown
from dashboard.api.schemas import ErrorGroupOut, ErrorGroupPage
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries.grouping import as_the_viewer_sees
from dashboard.deliveries.models import ErrorGroup, ErrorGroupStream
from dashboard.web.forms import ErrorGroupsForm
from dashboard.web.views.errors import error_group_entries

router = Router(tags=["error groups"])

_FORM_FIELDS = list(ErrorGroupsForm.base_fields)
ErrorGroupFilters: type[Schema] = create_model(  # type: ignore[call-overload]
    "ErrorGroupFilters",
    __base__=Schema,
    **{
        name: (str | None, Field(None, description=str(ErrorGroupsForm.base_fields[name].label or name)))
        for name in _FORM_FIELDS
    },
)


@router.get("/error-groups", response=ErrorGroupPage, summary="Error groups failing in a window (default 7 days)")
@on_replica
def error_group_list(
    request: HttpRequest,
    filters: Query[ErrorGroupFilters],  # type: ignore[valid-type]
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [*_FORM_FIELDS, "limit", "cursor"])
    data = QueryDict(mutable=True)
    for name in _FORM_FIELDS:
        data.setlist(name, request.GET.getlist(name))
    form = ErrorGroupsForm(data)
    if not form.is_valid():
        raise bad_parameters(form)
    entries, _step = error_group_entries(form.cleaned_data)
    start = 0
    position = read_int_cursor(cursor)
    if position is not None:
        # The page's order (most failures first) is computed whole; the cursor names the last group shown.
        ids = [entry["group"].pk for entry in entries]
        if position[1] not in ids:
            raise Problem(400, "cursor: the list changed since this cursor; start again without it.",
                          kind="invalid-parameter")
        start = ids.index(position[1]) + 1
    shown = entries[start : start + limit]
    more = start + limit < len(entries)
    counts = _delivery_counts([entry["group"] for entry in shown])
    items = [
        {
            **_group(entry["group"], counts),
            "failures": entry["stats"].total,
            "streams": sorted(entry["stats"].streams),
            "tags": sorted(entry["stats"].tags),
            "webhook_urls": sorted(entry["stats"].urls),
        }
        for entry in shown
    ]
    last = shown[-1]["group"] if shown else None
    next_cursor = int_cursor(last.last_seen, last.pk) if last is not None and more else None
    return {"items": items, "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


def _group(group: ErrorGroup, counts: dict[int, int]) -> dict[str, Any]:
    """The group as the viewer sees it (`as_the_viewer_sees` ran on it)."""
    return {
        "id": group.pk, "template": group.template, "first_seen": group.first_seen, "last_seen": group.last_seen,
        "delivery_count": counts.get(group.pk, 0),
    }


def _delivery_counts(groups: list[ErrorGroup]) -> dict[int, int]:
    """Each group's stored deliveries: the group's own count for who sees every stream; for a team member their
    streams' deliveries in it, summed from the counts per group and stream (`ErrorGroupStream`, one query)."""
    if visibility.current().everything:
        return {group.pk: group.delivery_count for group in groups}
    if not groups:
        return {}
    rows = (
        ErrorGroupStream.objects.filter(error_group_id__in=[g.pk for g in groups])
        .values("error_group_id").annotate(n=Sum("delivery_count")).order_by()
    )
    return {row["error_group_id"]: int(row["n"]) for row in rows}


@router.get("/error-groups/{int:group_id}", response=ErrorGroupOut, summary="One error group")
@on_replica
def error_group_detail(request: HttpRequest, group_id: int) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [])
    group = ErrorGroup.objects.filter(pk=group_id).first()
    if group is None:
        raise Http404("No error group with this id.")
    as_the_viewer_sees([group])
    return _group(group, _delivery_counts([group]))
