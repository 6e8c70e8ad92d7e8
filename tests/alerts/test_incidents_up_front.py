"""Open incidents where people look first: at the top of the Overview, as a count in the navigation and as
marks on the Streams page; read in one query that every page shares."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.accounts.roles import VIEWERS, assign_role
from dashboard.alerts import evaluate
from dashboard.alerts.models import Incident
from tests.alerts.factories import HOOK, STREAM, failures, fixed_now, make_rule, make_source
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client() -> Client:
    user: User = make_user("vera")
    assign_role(user, VIEWERS)
    http = Client()
    http.force_login(user)
    return http


def open_one() -> Incident:
    now = fixed_now()
    failures(make_source(), now, 3)
    make_rule("Failing stream", scope="all")
    evaluate.evaluate_all(now)
    return Incident.objects.open().get()


def incident_queries(captured: Any) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if '"alerts_incident"' in q["sql"]]


def test_the_overview_lists_open_incidents_at_the_top(viewer_client: Client) -> None:
    body = viewer_client.get("/").content.decode()
    assert "No open incidents." in body and 'id="open-incidents"' not in body

    incident = open_one()
    with CaptureQueriesContext(connection) as captured:
        body = viewer_client.get("/").content.decode()
    # The list and the navigation's count come from the same single query.
    assert len(incident_queries(captured)) == 1
    top = body[body.index('id="open-incidents"'):]
    top = top[: top.index("</table>")]
    assert body.index('id="open-incidents"') < body.index('class="cards"')
    assert "1 open incident" in top and "Failing stream" in top
    assert f"/alerts/incidents/{incident.pk}/" in top
    assert incident.opened_at.strftime("%Y-%m-%d %H:%M") in top
    assert "not acknowledged" in top

    Incident.objects.filter(pk=incident.pk).update(acknowledged_by="olga", acknowledged_at=timezone.now())
    body = viewer_client.get("/").content.decode()
    assert "olga" in body[body.index('id="open-incidents"'):body.index('class="cards"')]


def test_the_navigation_counts_open_incidents_on_every_page(viewer_client: Client) -> None:
    open_one()
    for url in ("/", "/deliveries/", "/errors/", "/streams/", "/alerts/"):
        body = viewer_client.get(url).content.decode()
        assert '<span class="nav-count" title="1 open incident">1</span>' in body, url
    # One query on a page that shows nothing else of incidents, read from the partial index of open ones.
    with CaptureQueriesContext(connection) as captured:
        viewer_client.get("/deliveries/")
    (sql,) = incident_queries(captured)
    assert '"resolved_at" IS NULL' in sql and "LIMIT" in sql
    Incident.objects.update(resolved_at=timezone.now())
    assert 'class="nav-count"' not in viewer_client.get("/deliveries/").content.decode()


def test_a_live_refresh_partial_reads_no_incidents_it_does_not_show(viewer_client: Client) -> None:
    open_one()
    with CaptureQueriesContext(connection) as captured:
        viewer_client.get("/deliveries/", HTTP_X_LIVE_REFRESH="1")
    assert incident_queries(captured) == []


def test_the_streams_page_marks_streams_and_urls_with_an_open_incident(viewer_client: Client) -> None:
    incident = open_one()
    assert incident.stream_id == STREAM or incident.webhook_url == HOOK
    body = viewer_client.get("/streams/").content.decode()
    row = body[body.index(STREAM[:8]) - 2000: body.index(STREAM[:8]) + 3000]
    assert f'href="/alerts/incidents/{incident.pk}/"' in row
    assert "pill-incident" in row
    Incident.objects.update(resolved_at=timezone.now())
    assert "pill-incident" not in viewer_client.get("/streams/").content.decode()


def test_a_user_without_the_viewer_role_is_shown_no_count(db: None) -> None:
    open_one()
    user = make_user("nobody", role=None)
    http = Client()
    http.force_login(user)
    assert 'class="nav-count"' not in http.get("/").content.decode()


def test_a_url_shared_by_two_streams_is_marked_only_on_the_stream_whose_incident_it_is(viewer_client: Client) -> None:
    from tests.alerts.factories import OTHER_STREAM, successes

    now = fixed_now()
    source = make_source()
    failures(source, now, 3)
    successes(source, now, 3, stream_id=OTHER_STREAM)
    make_rule("Failing stream", scope="all")
    evaluate.evaluate_all(now)
    incident = Incident.objects.open().get()
    assert (incident.stream_id, incident.webhook_url) == (STREAM, HOOK)
    body = viewer_client.get("/streams/").content.decode()
    rows = {stream: body[body.index(f'title="{stream}"') - 1500: body.index(f'title="{stream}"') + 1500]
            for stream in (STREAM, OTHER_STREAM)}
    assert rows[STREAM].count(f'href="/alerts/incidents/{incident.pk}/"') == 2  # the stream and its URL
    # The other stream sends to the same URL, but the incident is not about it.
    assert "pill-incident" not in body[body.index(f'title="{OTHER_STREAM}"'):body.index(f'title="{OTHER_STREAM}"') + 1500]
