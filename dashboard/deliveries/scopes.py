"""What a scope names — everything, one stream, one tag or one webhook URL — as the deliveries' (and streams')
column and value: the one home of scope matching for alert rules and maintenance windows."""

from __future__ import annotations

# The scope's name (AlertRule.scope, MaintenanceWindow.scope) to the column of Delivery, Stream and the rollups it
# narrows; "all" names none.
SCOPE_COLUMNS = {"stream": "stream_id", "tag": "tag", "webhook_url": "webhook_url"}


def scope_filter(scope: str, value: str) -> tuple[str, str] | None:
    """(column, value) for a scope; None for everything."""
    column = SCOPE_COLUMNS.get(scope)
    return (column, value) if column is not None else None


def in_scope(scope: tuple[str, str] | None, **columns: str) -> bool:
    """Whether a target whose columns are `columns` (stream_id=…, tag=…) falls in `scope`. A column the target
    does not have (a source has no stream) is never in a narrowed scope."""
    if scope is None:
        return True
    column, value = scope
    return column in columns and columns[column] == value
