"""Error groups: failures grouped by their message template, most recently seen first."""


from typing import Any

from django.db.models import Q
from django.http import Http404, HttpRequest
from ninja import Query, Router

from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, int_cursor, next_url, on_replica, read_int_cursor
from dashboard.api.problems import refuse_unknown
from dashboard.api.schemas import ErrorGroupOut, ErrorGroupPage
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries.models import ErrorGroup

router = Router(tags=["error groups"])


@router.get("/error-groups", response=ErrorGroupPage, summary="Error groups, last seen first")
@on_replica
def error_group_list(
    request: HttpRequest,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    qs = ErrorGroup.objects.order_by("-last_seen", "-id")
    position = read_int_cursor(cursor)
    if position is not None:
        seen, pk = position
        qs = qs.filter(Q(last_seen__lt=seen) | Q(last_seen=seen, id__lt=pk))
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = int_cursor(rows[-1].last_seen, rows[-1].pk) if rows and more else None
    return {"items": rows, "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.get("/error-groups/{int:group_id}", response=ErrorGroupOut, summary="One error group")
@on_replica
def error_group_detail(request: HttpRequest, group_id: int) -> ErrorGroup:
    allow(request, VIEW)
    refuse_unknown(request, [])
    group = ErrorGroup.objects.filter(pk=group_id).first()
    if group is None:
        raise Http404("No error group with this id.")
    return group
