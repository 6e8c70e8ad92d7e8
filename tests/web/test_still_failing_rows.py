"""The Retries page's "Still failing" rows (`still_failing_rows`) are built in Python; they are the markup the
template loop they replace rendered (kept as the reference in `tests/web/reference/still_failing_rows.html`), for
every kind of value a cell can hold: a next retry due or passed, none left, retries stopped by the provider."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.template import Context, Template
from django.test import Client
from django.utils import timezone

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.schedule import MAX_RETRIES, retry_schedule
from dashboard.sources.models import Source
from tests.web.conftest import record, store

pytestmark = pytest.mark.django_db

REFERENCE = Template((Path(__file__).parent / "reference" / "still_failing_rows.html").read_text())
CURRENT = Template("{% load dashboard %}{% still_failing_rows still_failing as rows %}{{ rows }}")
HOSTILE = '<img src=x onerror=alert(1)> & "quoted" \u202egnp.exe'


def _same(html: str) -> str:
    return re.sub(r"\s*\n\s*", "", html).strip()


def _still_failing(source: Source) -> list[Delivery]:
    now = timezone.now()
    store(
        source,
        record(date=now - timedelta(minutes=3), tag=HOSTILE, url=f"https://hooks.example.com/{HOSTILE}",
               error=HOSTILE + " x" * 600, retries=1),
        record(date=now - timedelta(hours=5), tag="", retries=3, error="Request failed with status code 500"),
        record(date=now - timedelta(hours=44), tag="beta", retries=MAX_RETRIES, error="timeout"),
        record(date=now - timedelta(hours=2), tag="gamma", retries=2, error="socket hang up"),
    )
    shown = list(Delivery.objects.newest_first())
    # Newest first: 3 min (next retry ahead), 2 h (its stream paused: retries stopped), 5 h (next retry passed),
    # 44 h (every retry spent: none left).
    statuses = ["", "paused", "", ""]
    for d, status in zip(shown, statuses, strict=True):
        d.schedule = retry_schedule(d.date, d.retries, status)
    return shown


def test_the_rows_are_the_template_loops_rows(plain_source: Source) -> None:
    shown = _still_failing(plain_source)
    assert [bool(d.schedule.stopped) for d in shown] == [False, True, False, False]
    assert [d.schedule.next_retry is None for d in shown] == [False, True, False, True]
    for part in (shown, shown[:1], shown[-1:]):
        context = Context({"still_failing": part})
        assert _same(CURRENT.render(context)) == _same(REFERENCE.render(context))
    html = CURRENT.render(Context({"still_failing": shown}))
    assert html.count('<tr class="clickable"') == 4 and "<img src=x" not in html and "⟨U+202E⟩" in html


def test_the_retries_page_shows_them(plain_source: Source, logged_in_client: Client) -> None:
    shown = _still_failing(plain_source)
    body = logged_in_client.get("/retries/").content.decode()
    table = body.split('id="still-failing"', 1)[1].split("</table>", 1)[0]
    retrying = [d for d in shown if d.status == "retrying"]
    assert retrying and table.count('<tr class="clickable"') == len(retrying)
    assert all(f'data-href="/deliveries/{d.pk}/"' in table for d in retrying)
    assert "<img src=x" not in table
