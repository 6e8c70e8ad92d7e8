"""Retry statistics: the Retries page's table (`web.views.retries.retry_statistics_rows`) for its form's filters
(`RetryStatsForm`: window, default 7 days; `by` stream or tag; `stream`, `tag`), most retried first, paged by the
last row's key, with the row over all deliveries."""

from typing import Any

from django.http import HttpRequest, QueryDict
from ninja import Field, Query, Router, Schema
from pydantic import create_model

from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, key_cursor, next_url, on_replica, read_key_cursor
from dashboard.api.problems import Problem, bad_parameters, refuse_unknown
from dashboard.api.schemas import RetryStatsOut
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.web.forms import RetryStatsForm
from dashboard.web.retry_stats import RetryRow
from dashboard.web.views.retries import retry_statistics_rows

router = Router(tags=["retries"])

_FORM_FIELDS = list(RetryStatsForm.base_fields)
RetryFilters: type[Schema] = create_model(  # type: ignore[call-overload]
    "RetryFilters",
    __base__=Schema,
    **{
        name: (str | None, Field(None, description=str(RetryStatsForm.base_fields[name].label or name)))
        for name in _FORM_FIELDS
    },
)


def _row(row: RetryRow) -> dict[str, Any]:
    return {
        "key": row.key, "label": row.label, "total": row.total, "delivered": row.delivered,
        "retrying": row.retrying, "failed": row.failed, "retried": row.retried, "by_retries": row.distribution,
        "delivered_after": row.delivered_after, "first_try_percent": row.first_try_share,
        "eventually_percent": row.eventually_share, "median_seconds_to_success": row.median_time_to_success,
    }


@router.get("/retries", response=RetryStatsOut, summary="Retry statistics per stream or tag (the Retries page)")
@on_replica
def retry_statistics(
    request: HttpRequest,
    filters: Query[RetryFilters],  # type: ignore[valid-type]
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=400, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    """Per row: deliveries by retry count (`by_retries[r]`: r retries), delivered after r retries, retrying,
    failed, the share delivered on the first try, the share of retried ones that got through, the median
    seconds to success of those that needed a retry (the schedule's time, a replay's exact one)."""
    allow(request, VIEW)
    refuse_unknown(request, [*_FORM_FIELDS, "limit", "cursor"])
    data = QueryDict(mutable=True)
    for name in _FORM_FIELDS:
        data.setlist(name, request.GET.getlist(name))
    form = RetryStatsForm(data)
    if not form.is_valid():
        raise bad_parameters(form)
    rows, overall = retry_statistics_rows(form.cleaned_data)
    start = 0
    after = read_key_cursor(cursor)
    if after is not None:
        keys = [row.key for row in rows]
        if after not in keys:
            raise Problem(400, "cursor: the list changed since this cursor; start again without it.",
                          kind="invalid-parameter")
        start = keys.index(after) + 1
    shown = rows[start : start + limit]
    more = start + limit < len(rows)
    next_cursor = key_cursor(shown[-1].key) if shown and more else None
    window = form.cleaned_data["window"]
    return {
        "by": form.cleaned_data.get("by") or "stream",
        "start": window.start,
        "end": window.end,
        "overall": _row(overall),
        "items": [_row(row) for row in shown],
        "next_cursor": next_cursor,
        "next": next_url(request, next_cursor),
    }
