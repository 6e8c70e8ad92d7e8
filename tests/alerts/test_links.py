"""The links in alert mails, followed: each leads to the filtered deliveries list showing those failures."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.test import Client

from dashboard.accounts.roles import VIEWERS, assign_role
from dashboard.alerts import evaluate
from dashboard.alerts.models import Incident, Notification
from tests.alerts.factories import (
    HOOK,
    OTHER_STREAM,
    REFUSED,
    failures,
    fixed_now,
    make_rule,
    make_source,
    record,
    store,
    successes,
)
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

TIMEOUT = "timeout of 10000ms exceeded"


def viewer() -> Client:
    user = make_user("vera")
    assign_role(user, VIEWERS)
    http = Client()
    http.force_login(user)
    return http


def listed_ids(http: Client, url: str) -> set[str]:
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == "http://localhost:8000"
    response = http.get(f"{parts.path}?{parts.query}")
    assert response.status_code == 200, url
    return set(re.findall(r'href="/deliveries/([0-9a-f-]{36})/"', response.content.decode()))


def test_it_links_to_the_failures_still_being_retried_and_to_each_error_group() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    refused = failures(source, now, 3, retries=2)
    timeouts = failures(source, now - timedelta(minutes=1), 2, error=TIMEOUT)
    delivered = successes(source, now, 2)
    elsewhere = failures(source, now, 1, stream_id=OTHER_STREAM, tag="other", webhook_url="https://other.example/h")

    evaluate.evaluate_all(now)

    mail = Notification.objects.get(body_text__contains="stream orders")
    links = re.findall(r"http://\S+/deliveries/\?\S+", mail.body_text)
    assert links == [html.unescape(h) for h in re.findall(r'href="(http://[^"]+/deliveries/\?[^"]+)"', mail.body_html)]
    group_links, (failed_link, all_link) = links[:2], links[2:]
    http = viewer()
    failing = {r["id"] for r in refused + timeouts}
    # The deliveries are retrying, not yet failed for good: the link must still list every one of them.
    assert listed_ids(http, failed_link) == failing
    assert listed_ids(http, all_link) == failing | {r["id"] for r in delivered}
    assert listed_ids(http, group_links[0]) == {r["id"] for r in refused}
    assert listed_ids(http, group_links[1]) == {r["id"] for r in timeouts}
    assert not {r["id"] for r in elsewhere} & listed_ids(http, all_link)


def test_a_webhook_url_incident_links_to_that_urls_deliveries() -> None:
    now = fixed_now()
    source = make_source()
    make_rule(condition="error_state_risk", threshold_percent=100)
    failed = [
        record(now - timedelta(minutes=i), error=REFUSED, stream_id=sid, block=19_000_000 + i)
        for i, sid in enumerate(["9f6c1c4e-1f0c-4d6a-9a43-5f1b0c7d2e11", OTHER_STREAM])
    ]
    store(source, *failed)
    other_url = failures(source, now, 1, webhook_url="https://other.example/h")

    evaluate.evaluate_all(now)

    mail = Notification.objects.get(body_text__contains=HOOK)
    failed_link = re.search(r"Failed deliveries: (\S+)", mail.body_text).group(1)  # type: ignore[union-attr]
    listed = listed_ids(viewer(), failed_link)
    assert listed == {r["id"] for r in failed}
    assert other_url[0]["id"] not in listed


def test_the_incident_link_is_the_incidents_page_which_links_the_same_lists() -> None:
    now = fixed_now()
    source = make_source()
    make_rule()
    failures(source, now, 2)

    evaluate.evaluate_all(now)

    incident = Incident.objects.get()
    mail = Notification.objects.get(incident=incident)
    incident_link = f"http://localhost:8000{incident.get_absolute_url()}"
    assert incident.get_absolute_url() == f"/alerts/incidents/{incident.pk}/"
    assert incident_link in mail.body_text
    assert f'href="{incident_link}"' in mail.body_html
    response = viewer().get(incident.get_absolute_url())
    assert response.status_code == 200
    page = response.content.decode()
    failed_link = re.search(r"Failed deliveries: http://localhost:8000(\S+)", mail.body_text)
    assert failed_link is not None and f'href="{html.escape(failed_link.group(1))}"' in page


def test_a_stale_sources_incident_links_to_its_page_and_the_alerts_only() -> None:
    now = fixed_now()
    make_source(last_success_at=now - timedelta(minutes=11))
    make_rule("Poller stale", condition="poller_stale", stale_minutes=10)

    evaluate.evaluate_all(now)

    incident = Incident.objects.get()
    text = Notification.objects.get(incident=incident).body_text
    assert f"http://localhost:8000{incident.get_absolute_url()}" in text
    assert "/deliveries/" not in text
