"""Access checks other apps use: `@viewer_required` for reading pages, `@staff_required` for changing ones.

Anonymous users are sent to the login page; logged-in users without the role get a 403 and no data.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from dashboard.accounts.roles import MANAGE_DASHBOARD, VIEW_DASHBOARD

View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def can_view_dashboard(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(VIEW_DASHBOARD))


def is_staff_member(user: Any) -> bool:
    """Staff: may use the admin and change things. Superusers are staff."""
    return bool(
        user.is_authenticated and user.is_active and user.is_staff and user.has_perm(MANAGE_DASHBOARD)
    )


def _require(check: Callable[[Any], bool]) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not check(request.user):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return login_required(wrapped)  # type: ignore[return-value]

    return decorator


viewer_required = _require(can_view_dashboard)
staff_required = _require(is_staff_member)
