"""The true impact in an incident's messages and on its page: failing now, failed so far, still on the
retry schedule, given up, first and last failure; the same figures in every place."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from dashboard.alerts import evaluate, workflow
from dashboard.alerts.impact import incident_impact
from dashboard.alerts.models import Incident, Notification, NotificationKind
from dashboard.deliveries.schedule import MAX_RETRIES
from tests.alerts.factories import (
    OTHER_STREAM,
    REFUSED,
    STREAM,
    fixed_now,
    make_rule,
    make_source,
    record,
    store,
)
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_messages_and_the_page_state_the_true_impact() -> None:
    now = fixed_now()
    source = make_source()
    store(
        source,
        # In the rule's 15-minute window: three retrying.
        *(record(now - timedelta(minutes=m), error=REFUSED, retries=1, block=100 + m) for m in (2, 4, 6)),
        # Before the window, still retrying, its second retry inside it (11 min after the first attempt).
        record(now - timedelta(minutes=20), error=REFUSED, retries=2, block=200),
        # Given up (retries used up), its last attempt long before: not this incident's.
        record(now - timedelta(days=3), error=REFUSED, retries=MAX_RETRIES, block=300),
        # Failed in the window, delivered on a retry.
        record(now - timedelta(minutes=8), retries=2, block=400),
        # Another stream's failure is not counted.
        record(now - timedelta(minutes=3), error=REFUSED, retries=1, stream_id=OTHER_STREAM, block=500),
        # Delivered at once: no failure.
        record(now - timedelta(minutes=1), block=600),
    )
    make_rule("Failing stream", scope="all")
    evaluate.evaluate_all(now)
    incident = Incident.objects.open().get(stream_id=STREAM)

    impact = incident_impact(incident, now)
    assert impact is not None
    assert (impact.retrying, impact.given_up, impact.recovered) == (4, 0, 1)
    assert (impact.failing_now, impact.failed) == (4, 5)
    assert impact.first_failure == now - timedelta(minutes=20)
    assert impact.last_failure == now - timedelta(minutes=2)

    opening = Notification.objects.get(incident=incident, kind=NotificationKind.OPENED)
    text = " ".join(opening.body_text.split())
    assert "Failing now: 4" in text
    assert "Failed so far: 5 (4 still failing, 1 delivered on a retry)" in text
    assert "On the retry schedule: 4" in text and "Given up: 0" in text
    # The oldest delivery counted was first sent before the window: the wording says what each time covers.
    assert impact.first_failure < impact.since
    assert f"deliveries with a failed attempt since {impact.since:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "a delivery first sent earlier counts when a retry failed since then" in text
    assert f"Oldest of them, first sent: {impact.first_failure:%Y-%m-%d %H:%M:%S} UTC" in text
    assert f"Newest of them, first sent: {impact.last_failure:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "First failure:" not in text and "First failure<" not in opening.body_html
    assert "Failed so far" in opening.body_html

    # The page shows the same figures.
    viewer = Client()
    viewer.force_login(make_user("vera"))
    page = viewer.get(f"/alerts/incidents/{incident.pk}/")
    assert page.context["impact"] == incident_impact(incident, page.context["impact"].at)
    body = " ".join(page.content.decode().split())
    # Labelled with what it counts, unlike the deliveries list's "failing" (first sent in its window).
    assert '<th>Retrying or failed now</th><td class="num">4</td>' in body
    assert "those not delivered yet (on the retry schedule, or given up)" in body
    assert '<th>Failed so far</th><td class="num">5</td>' in body
    assert f"deliveries with a failed attempt since {impact.since:%Y-%m-%d %H:%M:%S} UTC" in body
    assert "<th>Oldest of them, first sent</th>" in body and "<th>First failure</th>" not in body

    # One of them is given up before the resolution: the resolution says so.
    from dashboard.deliveries.models import Delivery

    Delivery.objects.filter(block_number=104).update(status="failed", retries=MAX_RETRIES)
    workflow.resolve([incident], by="olga", now=now + timedelta(minutes=1))
    resolution = Notification.objects.get(incident=incident, kind=NotificationKind.RESOLVED)
    text = " ".join(resolution.body_text.split())
    assert "Failing now: 4" in text and "On the retry schedule: 3" in text and "Given up: 1" in text
