"""The completeness pages: the stream page's windows, marking one, a scan prepared, confirmed with its cost and run,
the missing blocks re-sent through the action pages and the window verified; bad input answers 400 with a message,
and the permissions hold."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.actions import block_scan
from dashboard.actions.models import BlockScan, ProviderAction, ScanState
from dashboard.deliveries.models import OutageWindow
from tests.actions.completeness_world import World
from tests.conftest import make_user


def staff_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def iso(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def test_find_resend_and_verify_from_the_pages(
    world: World, eager_tasks: None, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scenario's address reload ended four minutes before the world's start, which is now: the pages scan it
    # once its deliveries have had 30 s to be polled (the real settling time is tested in test_block_scan).
    monkeypatch.setattr(block_scan, "SETTLE", timedelta(seconds=30))
    world.settle(world.reload()[2])
    client = staff_client(make_user("operator", role="Staff"))
    treasury = world.stream("treasury-wallets")
    page = client.get(treasury.get_absolute_url()).content.decode()
    assert "Completeness" in page and "still error" in page
    swaps = world.stream("uniswap-v2-swaps")
    _, begins, ends = world.reload()
    # Marked with the simulator's clock standing at the scenario's start, which is now.
    answer = client.post(f"/streams/{swaps.stream_id}/windows/mark/",
                         {"start": iso(begins), "end": iso(ends), "reason": "address reload"})
    assert answer.status_code == 302
    window = OutageWindow.objects.get(stream=swaps)
    page = client.get(window.get_absolute_url()).content.decode()
    assert "Find missing blocks" in page and "interpolated between stored blocks" in page
    assert client.post(f"/windows/{window.pk}/scan/").status_code == 302
    scan = BlockScan.objects.get(window=window)
    page = client.get(window.get_absolute_url()).content.decode()
    assert f"Preview {scan.planned} blocks" in page and "left of today's budget" in page
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/scans/{scan.pk}/confirm/").status_code == 302
    scan.refresh_from_db()
    assert scan.state == ScanState.DONE
    page = client.get(window.get_absolute_url()).content.decode()
    missing = page.count("<td class=\"mono\">")
    assert missing >= 3 and f"Re-send {missing} blocks" in page
    answer = client.post(f"/scans/{scan.pk}/resend/")
    action = ProviderAction.objects.get(scan=scan)
    assert answer["Location"] == action.get_absolute_url()
    page = client.get(action.get_absolute_url()).content.decode()
    assert f"Re-send {missing} missing blocks" in page and f"Re-send {missing} blocks</button>" in page
    world.catch_up()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/actions/{action.pk}/confirm/")
    page = client.get(window.get_absolute_url()).content.decode()
    assert f"Recovered 0 of {missing}" in page and "Still missing" in page
    world.poll()
    page = client.get(window.get_absolute_url()).content.decode()
    assert f"Recovered {missing} of {missing}" in page and "Still missing" not in page


def test_bad_input_gets_a_message_never_a_500(world: World) -> None:
    client = staff_client(make_user("operator", role="Staff"))
    swaps = world.stream("uniswap-v2-swaps")
    url = f"/streams/{swaps.stream_id}/windows/mark/"
    now = world.now
    cases = [
        ({"start": "yesterday", "end": "today"}, "Enter a valid date/time"),
        ({"start": iso(now), "end": "2999-01-01 00:00"}, "in the future"),
        ({"start": "2022-01-01 00:00", "end": iso(now.replace(microsecond=0))}, "more than 100,000"),
    ]
    for data, message in cases:
        answer = client.post(url, data)
        assert answer.status_code == 400 and message in answer.content.decode(), data
    assert client.post("/streams/nope/windows/mark/", {}).status_code == 404
    assert client.post("/windows/999999/scan/").status_code == 404


def test_viewers_may_look_but_not_scan_and_writes_off_stops_the_resend(world: World, settings: Any) -> None:
    viewer = staff_client(make_user("viewer"))
    treasury = world.stream("treasury-wallets")
    window = OutageWindow.objects.get(stream=treasury)
    page = viewer.get(window.get_absolute_url())
    assert page.status_code == 200 and "Find missing blocks</button>" not in page.content.decode()
    assert viewer.post(f"/windows/{window.pk}/scan/").status_code == 403
    settings.PROVIDER_WRITES = False
    staff = staff_client(make_user("operator", role="Staff"))
    # A scan writes nothing: it may run with writes off; its re-send may not.
    assert "Find missing blocks</button>" in staff.get(window.get_absolute_url()).content.decode()
    scan = BlockScan.objects.create(window=window, stream_id=treasury.stream_id, requested_by_name="x",
                                    state=ScanState.DONE)
    assert staff.post(f"/scans/{scan.pk}/resend/").status_code == 403
