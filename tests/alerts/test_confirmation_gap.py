"""Confirmation gaps as an alert condition: the blocks the Confirmation gaps page lists (deliveries/pairs.py),
per stream, narrowed to the rule's scope; an incident opens on them and resolves once the confirmed
delivery arrives. The rule the migration creates is off."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core import mail as outbox

from dashboard.alerts import conditions, evaluate
from dashboard.alerts.mail import MAIL
from dashboard.alerts.models import Condition, Incident, Scope
from dashboard.deliveries.pairs import confirmation_gaps
from dashboard.sources.models import Source
from tests import factories
from tests.alerts.factories import HOOK, OTHER_STREAM, STREAM, fixed_now, make_rule, make_source

pytestmark = pytest.mark.django_db

FAILED = {"error": "Request failed with status code 502", "retries": 7}


def delivery(date: datetime, block: int, *, confirmed: bool, stream_id: str = STREAM, tag: str = "orders",
             chain: str = "0x1", **kw: Any) -> dict[str, Any]:
    return factories.history_record(
        date=date, stream_id=stream_id, tag=tag, webhook_url=HOOK, confirmed=confirmed, block=block, chain=chain,
        **kw,
    )


def gappy_history(source: Source, now: datetime) -> None:
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    factories.store(
        source,
        delivery(ago(60), 1, confirmed=False), delivery(ago(55), 1, confirmed=True),  # whole
        delivery(ago(60), 2, confirmed=False),  # its confirmed delivery never came
        delivery(ago(60), 3, confirmed=False), delivery(ago(55), 3, confirmed=True, **FAILED),  # confirmed failing
        delivery(ago(3), 4, confirmed=False),  # not final yet
        delivery(ago(60), 7, confirmed=False, stream_id=OTHER_STREAM, tag="payouts"),  # another stream's gap
        delivery(ago(60), 8, confirmed=False, **FAILED), delivery(ago(55), 8, confirmed=True, **FAILED),  # both failed
        delivery(ago(60 * 30), 9, confirmed=False),  # a gap, but older than the rule's window
    )
    Source.objects.filter(pk=source.pk).update(synced_through=now)


def test_it_holds_per_stream_for_the_gaps_the_page_lists(settings: Any) -> None:
    settings.CONFIRMATION_GRACE_SECONDS = 600
    now = fixed_now()
    gappy_history(make_source(), now)
    rule = make_rule("Confirmation gaps", condition=Condition.CONFIRMATION_GAP, window_minutes=360)

    seen = {o.target_key: o for o in conditions.observe(rule, now)}
    assert set(seen) == {STREAM, OTHER_STREAM}
    orders = seen[STREAM]
    assert (orders.failures, orders.extra["missing_confirmed"], orders.extra["failed_confirmed"]) == (2, 1, 1)
    assert sorted((g["kind"], g["block_number"]) for g in orders.extra["gaps"]) == [("failed", 3), ("missing", 2)]
    # The page's query over the same window finds exactly these blocks.
    page = confirmation_gaps(now - timedelta(minutes=360), now + timedelta(days=1), grace=timedelta(minutes=10))
    assert sorted((g.unconfirmed.stream_id, g.unconfirmed.block_number) for g in page) == sorted(
        (key, g["block_number"]) for key, o in seen.items() for g in o.extra["gaps"])
    details = conditions.describe(rule, orders, now)
    assert conditions.headline(rule, orders, details) == (
        "stream orders: 2 blocks without a delivered confirmed delivery — 1 missing after finality, "
        "1 failing while the unconfirmed one was delivered"
    )
    assert "finality" in rule.describe_condition()


def test_the_scope_narrows_the_query(settings: Any) -> None:
    settings.CONFIRMATION_GRACE_SECONDS = 600
    now = fixed_now()
    gappy_history(make_source(), now)
    by_stream = make_rule("one stream", condition=Condition.CONFIRMATION_GAP, window_minutes=360,
                          scope=Scope.STREAM, scope_value=OTHER_STREAM)
    assert [o.target_key for o in conditions.observe(by_stream, now)] == [OTHER_STREAM]
    by_tag = make_rule("one tag", condition=Condition.CONFIRMATION_GAP, window_minutes=360,
                       scope=Scope.TAG, scope_value="orders")
    assert [o.target_key for o in conditions.observe(by_tag, now)] == [STREAM]
    # A grace longer than the gaps' age: no confirmed delivery is due yet; the failing one still counts.
    settings.CONFIRMATION_GRACE_SECONDS = 3600
    (seen,) = conditions.observe(by_tag, now)
    assert (seen.extra["missing_confirmed"], seen.extra["failed_confirmed"]) == (0, 1)


def test_an_incident_opens_with_one_mail_and_resolves_when_the_confirmed_delivery_arrives(settings: Any) -> None:
    settings.CONFIRMATION_GRACE_SECONDS = 600
    now = fixed_now()
    source = make_source()
    gappy_history(source, now)
    make_rule("Confirmation gaps", condition=Condition.CONFIRMATION_GAP, window_minutes=360, grace_minutes=5,
              scope=Scope.STREAM, scope_value=STREAM)

    for notification_id in evaluate.evaluate_all(now):
        MAIL.send(notification_id, now)
    incident = Incident.objects.get()
    assert incident.is_open and incident.stream_id == STREAM
    assert incident.summary.startswith("stream orders: 2 blocks without a delivered confirmed delivery")
    assert len(outbox.outbox) == 1 and "CONFIRMATION GAP" in outbox.outbox[0].subject
    assert sorted(g["block_number"] for g in incident.details["gaps"]) == [2, 3]
    assert evaluate.evaluate_all(now + timedelta(minutes=1)) == []  # still holding: no second mail

    # Block 2's confirmed delivery arrives late and block 3's is retried successfully.
    factories.store(source, delivery(now - timedelta(minutes=50), 2, confirmed=True))
    retried = Incident.objects.get().details["gaps"]
    failed_id = next(g["confirmed_id"] for g in retried if g["kind"] == "failed")
    factories.store(source, delivery(now - timedelta(minutes=55), 3, confirmed=True, retries=2) | {"id": failed_id})
    later = now + timedelta(minutes=2)
    assert conditions.observe(Incident.objects.get().rule, later) == []
    evaluate.evaluate_all(later)
    for notification_id in evaluate.evaluate_all(later + timedelta(minutes=6)):
        MAIL.send(notification_id, later + timedelta(minutes=6))
    assert not Incident.objects.get().is_open
    assert len(outbox.outbox) == 2
