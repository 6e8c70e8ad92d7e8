from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_default_rules(db: None) -> None:
    """Each test states the rules it needs; the migration's defaults are tested on their own."""
    from dashboard.alerts.models import AlertRule

    AlertRule.objects.all().delete()
