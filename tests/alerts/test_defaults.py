"""After migrate, alerts work out of the box once ALERT_EMAILS is set."""

from __future__ import annotations

import pytest

from dashboard.alerts.models import AlertRule

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_default_rules() -> None:
    """Keep the rules the data migration created."""


def test_the_default_rules_exist(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ALERT_EMAILS = ["ops@example.com"]
    rules = {rule.name: rule for rule in AlertRule.objects.all()}

    failed = rules["Failed deliveries"]
    assert failed.enabled and failed.condition == "any_failure" and failed.scope == "all"
    assert failed.recipient_list() == ["ops@example.com"]
    stale = rules["Poller stale"]
    assert stale.enabled and stale.condition == "poller_stale"
    risk = rules["Provider error-state risk"]
    assert not risk.enabled and risk.threshold_percent == 80
    # Confirmation gaps are there to be switched on where a receiver acts only on confirmed blocks.
    gaps = rules["Confirmation gaps"]
    assert not gaps.enabled and gaps.condition == "confirmation_gap" and gaps.window_minutes == 360
    # The SLO burn rules are there to be switched on once the objectives say what the team promises.
    fast, slow = rules["SLO fast burn"], rules["SLO slow burn"]
    assert not fast.enabled and fast.condition == "slo_burn_fast" and fast.min_deliveries == 20
    assert not slow.enabled and slow.condition == "slo_burn_slow"
