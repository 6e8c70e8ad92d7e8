"""Password logins, which `LOCAL_LOGIN=0` turns off for everyone but the break-glass accounts
(`BREAK_GLASS_USERS`). A refused password counts as a failed login for django-axes like a wrong one."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend


def password_login_allowed(username: str | None) -> bool:
    return bool(settings.LOCAL_LOGIN or (username and username in settings.BREAK_GLASS_USERS))


class PasswordBackend(ModelBackend):
    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any) -> Any:
        if password is None or not password_login_allowed(username):
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
