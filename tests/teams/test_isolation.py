"""A member of team A, crawling every page and every API read, sees nothing of team B's stream: not its id,
tag, URL, error texts, transactions, deliveries, incidents, rules, windows or actions, and no count that
includes it. Team B's objects asked for by id are not found."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import get_resolver
from django.utils import timezone

from dashboard.api.tokens import create_token
from dashboard.deliveries.models import Delivery, OutageWindow, Stream
from tests.teams.conftest import (
    DELIVERIES_A,
    STREAM_A,
    STREAM_B,
    TAG_A,
    TAG_B,
    TX_A,
    TX_B,
    URL_A,
    URL_B,
    TwoTeams,
    session,
)

pytestmark = pytest.mark.django_db


def body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def pages(w: TwoTeams) -> list[str]:
    """Every page a member can read, with the filters that slice by stream, tag, URL and time."""
    a = w.delivery_a
    window_a = OutageWindow.objects.create(
        stream=Stream.objects.get(stream_id=STREAM_A), kind="marked", label="alpha reload",
        start=timezone.now() - timedelta(hours=3), end=timezone.now() - timedelta(hours=2),
    )
    found = [
        "/", "/?range=30d", "/streams/", f"/streams/{STREAM_A}/", "/maintenance/",
        "/timeline/", "/timeline/?range=30d", "/timeline/?range=24h&by=tag", f"/timeline/?tag={TAG_A}",
        f"/timeline/?url={URL_A}", "/timeline/?range=7d&chain=0x1",
        "/deliveries/", "/deliveries/?status=failing", "/deliveries/?range=30d&order=oldest",
        "/deliveries/export.csv", "/deliveries/export.csv?status=failing",
        "/deliveries/confirmation-gaps/", f"/deliveries/{a.pk}/", f"/deliveries/{a.pk}/payload.json",
        "/errors/", "/errors/?range=30d", "/errors/?by=event", "/retries/", "/retries/?by=tag", "/retries/?by=stream",
        "/search/", f"/search/?q={TX_A}", f"/search/?q={TX_B}", "/search/?q=bravogateway", "/search/?q=bravo",
        f"/search/?q={STREAM_A}", "/search/?q=ECONNREFUSED", "/search/?q=502",
        # Every search kind: an address, a block number, a decoded event, a delivery id, a tx hash in the list.
        "/search/?q=0x" + "b0" * 20, "/search/?q=19100000", "/search/?q=event:Transfer",
        f"/search/?q={w.delivery_b.pk}", f"/deliveries/?q={TX_B}", "/deliveries/?q=0x" + "b0" * 20,
        "/deliveries/?error=bravogateway",
        "/actions/", "/alerts/", f"/alerts/incidents/{w.incident_a.pk}/", "/account/tokens/",
        "/lookups/owners/", "/lookups/creators/",
    ]
    return [*found, f"/windows/{window_a.pk}/"]


def test_every_page_of_a_member_shows_nothing_of_the_other_team(two_teams: TwoTeams) -> None:
    client = session(two_teams.member_a)
    secrets = two_teams.secrets_of_b()
    for path in pages(two_teams):
        response = client.get(path, follow=True)
        if path == "/actions/":
            # The actions audit is staff's.
            assert response.status_code == 403
            continue
        text = body(response)
        if str(two_teams.delivery_b.pk) in path:
            # Another team's delivery id is answered as an id stored nowhere.
            assert response.status_code == 400 and "No delivery or stream with this id" in text
        else:
            assert response.status_code == 200, (path, response.status_code)
        # What the member typed may be shown back to them; nothing else of team B's.
        leaked = [s for s in secrets if s.lower() in text.lower() and s.lower() not in path.lower()]
        assert not leaked, (path, leaked)


def test_the_member_sees_their_own_stream(two_teams: TwoTeams) -> None:
    client = session(two_teams.member_a)
    assert TAG_A in body(client.get("/streams/"))
    assert str(two_teams.delivery_a.pk) in body(client.get("/deliveries/"))
    export = body(client.get("/deliveries/export.csv"))
    assert export.count(STREAM_A) == DELIVERIES_A
    assert str(two_teams.delivery_a.pk) in body(client.get(f"/search/?q={TX_A}"))
    assert two_teams.incident_a.summary in body(client.get("/alerts/"))


def test_the_other_teams_objects_are_not_found(two_teams: TwoTeams) -> None:
    client = session(two_teams.member_a)
    w = two_teams
    for path in [
        f"/streams/{STREAM_B}/", f"/deliveries/{w.delivery_b.pk}/", f"/deliveries/{w.delivery_b.pk}/payload.json",
        f"/windows/{w.window_b.pk}/", f"/actions/{w.action_b.pk}/", f"/alerts/incidents/{w.incident_b.pk}/",
        f"/alerts/notifications/{w.notification_b.pk}/", f"/alerts/notifications/{w.notification_b.pk}/body.html",
    ]:
        response = client.get(path)
        # 403: the page is staff's (the actions audit); 404 for what the member could read of their own.
        assert response.status_code in (403, 404), (path, response.status_code)


def test_filters_naming_the_other_teams_stream_find_nothing(two_teams: TwoTeams) -> None:
    client = session(two_teams.member_a)
    for path in [
        f"/deliveries/?stream={STREAM_B}", f"/deliveries/?tag={TAG_B}", f"/deliveries/?url={URL_B}",
        f"/deliveries/export.csv?stream={STREAM_B}", f"/timeline/?stream={STREAM_B}", f"/errors/?stream={STREAM_B}",
        f"/retries/?stream={STREAM_B}", f"/search/?q={STREAM_B}",
    ]:
        text = body(client.get(path, follow=True))
        assert str(two_teams.delivery_b.pk) not in text, path
        # Nothing it did not type: the tag and URL of the stream it named stay unknown.
        assert "bravogateway" not in text, path
        assert TAG_B not in text or TAG_B in path, path
        assert STREAM_B not in text or STREAM_B in path, path


def test_the_team_b_member_sees_team_b_and_not_team_a(two_teams: TwoTeams) -> None:
    client = session(two_teams.member_b)
    streams = body(client.get("/streams/"))
    assert TAG_B in streams and TAG_A not in streams and STREAM_A not in streams
    assert body(client.get("/deliveries/export.csv")).count(STREAM_B) == 7


def test_counts_on_the_overview_are_the_members_own(two_teams: TwoTeams) -> None:
    """The overview's totals count the member's deliveries only: the API's streams list says so too."""
    token = create_token(two_teams.member_a, "crawler", ["read"], timezone.now() + timedelta(days=1))[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    streams = api.get("/api/v1/streams").json()
    assert [s["stream_id"] for s in streams["items"]] == [STREAM_A]
    listed = api.get("/api/v1/deliveries?limit=100").json()
    assert {d["stream_id"] for d in listed["items"]} == {STREAM_A}
    assert len(listed["items"]) == Delivery.objects.filter(stream_id=STREAM_A).count()


def api_paths(w: TwoTeams, own: bool) -> list[str]:
    from tests.api.test_permissions import ENDPOINTS

    if own:
        ids = {
            "delivery_id": w.delivery_a.pk, "stream_id": STREAM_A, "group_id": w.delivery_a.error_group_id,
            "incident_id": w.incident_a.pk, "action_id": 0, "scan_id": 0, "window_id": 0,
        }
    else:
        ids = {
            "delivery_id": w.delivery_b.pk, "stream_id": STREAM_B, "group_id": w.delivery_b.error_group_id,
            "incident_id": w.incident_b.pk, "action_id": w.action_b.pk, "scan_id": 0, "window_id": w.window_b.pk,
        }
    paths = []
    for method, template, kind in ENDPOINTS:
        if method != "get" or kind == "administration":
            continue
        names = re.findall(r"{(\w+)}", template)
        if own and any(ids[n] == 0 for n in names):
            continue
        if not own and not names:
            continue
        paths.append(template.format(**ids))
    return paths


def test_every_api_read_of_a_member_shows_nothing_of_the_other_team(two_teams: TwoTeams) -> None:
    token = create_token(two_teams.member_a, "crawler", ["read"], timezone.now() + timedelta(days=1))[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    secrets = two_teams.secrets_of_b()
    extra = ["/api/v1/timeline?range=30d", "/api/v1/latency?range=30d", "/api/v1/retries?by=tag",
             "/api/v1/deliveries?status=failing", f"/api/v1/deliveries?q={TX_B}", "/api/v1/error-groups?range=30d"]
    for path in [*api_paths(two_teams, own=True), *extra]:
        response = api.get(path)
        assert response.status_code in (200, 403), (path, response.status_code, response.content[:300])
        leaked = [s for s in secrets if s.lower() in response.content.decode().lower() and s.lower() not in path.lower()]
        assert not leaked, (path, leaked)
    for path in api_paths(two_teams, own=False):
        response = api.get(path)
        assert response.status_code in (403, 404), (path, response.status_code)
        leaked = [s for s in secrets if s.lower() in response.content.decode().lower() and s != STREAM_B
                  and s != str(two_teams.delivery_b.pk)]
        assert not leaked, (path, leaked)


def test_the_crawl_covers_every_page(two_teams: TwoTeams) -> None:
    """Every named page of the dashboard is in the crawl (or in the list of those taking another team's id)."""
    covered = {p.split("?")[0] for p in pages(two_teams)}
    shapes = {re.sub(r"[0-9a-f-]{36}|\d+", "X", p) for p in covered}
    shapes |= {"/streams/X/", "/deliveries/X/", "/deliveries/X/payload.json", "/windows/X/", "/actions/X/",
               "/alerts/incidents/X/", "/alerts/notifications/X/", "/alerts/notifications/X/body.html"}
    missing = []
    for app in ("web", "alerts"):
        for pattern in get_resolver().namespace_dict[app][1].url_patterns:
            route = str(pattern.pattern)
            if any(word in route for word in ("confirm", "cancel", "resend", "scan", "mark", "status", "mute",
                                               "test", "resolve", "acknowledge", "assign", "notes", "snooze",
                                               "preview", "replay", "resend-block")):
                continue  # writes, and staff's pages
            prefix = "/alerts/" if app == "alerts" else "/"
            shape = prefix + re.sub(r"<[^>]+>", "X", route)
            if shape not in shapes:
                missing.append(shape)
    assert not missing, missing


def test_metrics_are_for_scrapers_and_staff_never_for_a_member(two_teams: TwoTeams, settings: Any) -> None:
    assert session(two_teams.member_a).get("/metrics").status_code == 403
    # A scraper is anonymous to the pages' visibility, and reads every stream's series.
    settings.METRICS_TOKEN = "scrape-token-0123456789"
    scraped = Client(HTTP_AUTHORIZATION="Bearer scrape-token-0123456789").get("/metrics").content.decode()
    assert f'stream="{STREAM_A}"' in scraped and f'stream="{STREAM_B}"' in scraped


def test_an_error_group_shared_by_both_teams_counts_and_dates_the_members_deliveries_only(
    two_teams: TwoTeams,
) -> None:
    from tests.factories import history_record, store

    source = two_teams.delivery_a.source
    now = timezone.now().replace(microsecond=0)
    shared = "connect ECONNREFUSED 10.0.0.1:443"
    # Team B fails with the same error two days before team A's failure, and one minute ago.
    dates_b = [now - timedelta(days=2, minutes=i) for i in range(3)] + [now - timedelta(minutes=1)]
    store(source, *[history_record(date=date, stream_id=STREAM_B, tag=TAG_B, webhook_url=URL_B, error=shared,
                                   retries=1, block=19_200_000 + i) for i, date in enumerate(dates_b)])
    group_id = two_teams.delivery_a.error_group_id
    own = two_teams.delivery_a.date
    token = create_token(two_teams.member_a, "crawler", ["read"], timezone.now() + timedelta(days=1))[1]
    member = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = member.get(f"/api/v1/error-groups/{group_id}").json()
    assert answer["delivery_count"] == 1
    # (the API gives milliseconds)
    assert at(answer["first_seen"]) == at(answer["last_seen"]) == own.replace(microsecond=own.microsecond // 1000 * 1000)
    [listed] = [g for g in member.get("/api/v1/error-groups?range=7d").json()["items"] if g["id"] == group_id]
    assert (listed["delivery_count"], listed["first_seen"], listed["last_seen"]) == (
        1, answer["first_seen"], answer["last_seen"])
    # The Error groups page dates the group by the member's failure, not by team B's.
    page = session(two_teams.member_a).get("/errors/?range=7d").content.decode()
    assert f'title="{own:%Y-%m-%d %H:%M:%S} UTC"' in page
    assert f"{min(dates_b):%Y-%m-%d %H:%M:%S}" not in page and f"{max(dates_b):%Y-%m-%d %H:%M:%S}" not in page

    staff_token = create_token(two_teams.staff, "ops", ["read"], timezone.now() + timedelta(days=1))[1]
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {staff_token}").get(f"/api/v1/error-groups/{group_id}").json()
    assert answer["delivery_count"] == 5
    assert (at(answer["first_seen"]), at(answer["last_seen"])) == (min(dates_b), max(dates_b))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_member_of_a_team_owning_nothing_gets_empty_pages_not_errors(two_teams: TwoTeams) -> None:
    from dashboard.accounts.models import Team
    from tests.teams.conftest import member

    client = session(member("nobody", Team.objects.create(name="Empty")))
    secrets = [*two_teams.secrets_of_b(), STREAM_A, TAG_A, URL_A]
    for path in pages(two_teams):
        response = client.get(path, follow=True)
        text = body(response)
        if path == "/actions/":
            assert response.status_code == 403
            continue
        if f"/{STREAM_A}/" in path or str(two_teams.delivery_a.pk) in path or "/windows/" in path or "/incidents/" in path:
            assert response.status_code in (400, 404), (path, response.status_code)
            continue
        assert response.status_code in (200, 400), (path, response.status_code)
        leaked = [s for s in secrets if s.lower() in text.lower() and s.lower() not in path.lower()]
        assert not leaked, (path, leaked)
