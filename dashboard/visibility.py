"""Which streams the viewer of a request may see, and the one function that narrows every read to them.

A team member sees only the streams of their teams (`deliveries.teams.visibility_for` works out which); staff
and the "Viewers" role see every stream. The middleware (`deliveries.teams.VisibilityMiddleware`) and the API's
token check put the viewer's `Visibility` in a context variable for the length of the request; outside a
request (Celery tasks, commands, the ingest) nothing is narrowed.

Every read of a stream's data goes through `scoped`: the models that hold stream data (deliveries, rollups,
streams, incidents, actions, windows…) use `ScopedManager` as their default manager, whose every queryset is
`scoped`; raw SQL adds `sql(column)` to its WHERE clause; code that builds a message or a file for one viewer
outside their request passes that viewer's `Visibility` explicitly. Imports no app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import models
from django.db.models import BooleanField, Q, Value

T = TypeVar("T")


@dataclass(frozen=True)
class Visibility:
    """`stream_ids` None: every stream. Otherwise the stream ids, and the tags and webhook URLs of those
    streams (for what is named by a tag or a URL: windows, rules, incidents)."""

    stream_ids: frozenset[str] | None
    tags: frozenset[str] = field(default_factory=frozenset)
    urls: frozenset[str] = field(default_factory=frozenset)

    @property
    def everything(self) -> bool:
        return self.stream_ids is None

    def allows(self, stream_id: str) -> bool:
        return self.stream_ids is None or stream_id in self.stream_ids

    def allows_tag(self, tag: str) -> bool:
        return self.stream_ids is None or tag in self.tags

    def allows_url(self, url: str) -> bool:
        return self.stream_ids is None or url in self.urls

    def sorted_ids(self) -> list[str]:
        return sorted(self.stream_ids or ())


EVERYTHING = Visibility(None)
NOTHING = Visibility(frozenset())

_current: ContextVar[Visibility | None] = ContextVar("dashboard_visibility", default=None)


def current() -> Visibility:
    """The viewer's visibility inside a request; every stream outside one (tasks, commands)."""
    return _current.get() or EVERYTHING


@contextmanager
def viewing(visibility: Visibility) -> Iterator[Visibility]:
    """Narrow every read inside the block to `visibility`."""
    token = _current.set(visibility)
    try:
        yield visibility
    finally:
        _current.reset(token)


def enter(visibility: Visibility) -> None:
    """Narrow every read to `visibility` for the rest of the request (a caller known only inside the view: an
    API token). The middleware's `viewing` block puts back what held before the request."""
    _current.set(visibility)


def carried(items: Iterable[T]) -> Iterator[T]:
    """`items` iterated under the visibility of the moment this is called: for a streamed response, whose
    body is read after the request's middleware has returned."""
    visibility = current()

    def iterate() -> Iterator[T]:
        with viewing(visibility):
            yield from items

    return iterate()


def stream_condition(visibility: Visibility, field_name: str = "stream_id") -> Q:
    return Q(**{f"{field_name}__in": visibility.sorted_ids()})


def scoped(queryset: Any, visibility: Visibility | None = None, condition: Callable[[Visibility], Q] | None = None) -> Any:
    """`queryset` narrowed to what `visibility` (default: the current viewer's) may see. `condition` gives the
    filter for a model that names streams otherwise than by a `stream_id` column."""
    visibility = visibility or current()
    if visibility.everything:
        return queryset
    if not visibility.stream_ids:
        # Seeing no stream, nothing of a stream's is seen. A false condition rather than `none()`: code that
        # compiles the query to SQL itself (rollup sums, counts) gets a query that finds nothing.
        return queryset.filter(Value(False, output_field=BooleanField()))
    return queryset.filter((condition or stream_condition)(visibility))


def sql(column: str, visibility: Visibility | None = None) -> tuple[str, list[Any]]:
    """The same narrowing as a WHERE condition on `column` (a stream id column) for raw SQL, and its params."""
    visibility = visibility or current()
    if visibility.everything:
        return "TRUE", []
    return f"{column} = ANY(%s)", [visibility.sorted_ids()]


def sql_named(column: str, name: str, visibility: Visibility | None = None) -> tuple[str, dict[str, Any]]:
    """`sql` for a query whose parameters are named: the condition uses `%(name)s`."""
    condition, params = sql(column, visibility)
    if not params:
        return condition, {}
    return f"{column} = ANY(%({name})s)", {name: params[0]}


class ScopedManager(models.Manager):  # type: ignore[type-arg]
    """A default manager whose querysets are `scoped`: by the model's `stream_id`, or by the Q its classmethod
    `visible_to(visibility)` gives (a model that names streams otherwise). Read from the model, so the managers
    Django derives from this one (a foreign key's reverse side) narrow the same way; the base manager (used for
    related objects and saves) is left whole."""

    def get_queryset(self) -> Any:
        return scoped(super().get_queryset(), condition=getattr(self.model, "visible_to", None))
