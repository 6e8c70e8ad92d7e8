from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def no_default_rules(db: None) -> None:
    """Each test states the rules it needs; the migration's defaults are tested on their own."""
    from dashboard.alerts.models import AlertRule

    AlertRule.objects.all().delete()


@pytest.fixture
def staff(db: None) -> Any:
    """A logged-in client of a staff user in the Staff role."""
    from django.test import Client

    from dashboard.accounts.roles import STAFF, assign_role
    from tests.conftest import make_user

    user = make_user("sam", staff=True)
    assign_role(user, STAFF)
    http = Client()
    http.force_login(user)
    return http
