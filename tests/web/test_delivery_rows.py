"""The deliveries table's rows (`delivery_rows`, used by the list, its live refresh and the search page) are
built in Python; they are the markup the template loop they replace rendered (kept as the reference in
`tests/web/reference/delivery_rows.html`), for every kind of value a cell can hold."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.template import Context, Template
from django.test import Client
from django.utils import timezone

from dashboard.deliveries.models import Delivery
from dashboard.deliveries.schedule import MAX_RETRIES
from dashboard.sources.models import Source
from tests.web.conftest import TX, record, store

pytestmark = pytest.mark.django_db

REFERENCE = Template((Path(__file__).parent / "reference" / "delivery_rows.html").read_text())
CURRENT = Template('{% include "web/_delivery_rows.html" %}')
HOSTILE = '<img src=x onerror=alert(1)> & "quoted" \u202egnp.exe'


def _varied(source: Source) -> list[Delivery]:
    now = timezone.now()
    deliveries = store(
        source,
        record(date=now - timedelta(minutes=1), tag=HOSTILE, url=f"https://hooks.example.com/{HOSTILE}",
               error=HOSTILE + " x" * 600, retries=3),
        record(date=now - timedelta(minutes=2), tag="", chain="0x89", confirmed=False, retries=MAX_RETRIES,
               error="Request failed with status code 500"),
        record(date=now - timedelta(minutes=3), tag="alpha", chain="0xdead", retries=0),
        record(date=now - timedelta(hours=30), tag="  ", chain="", retries=MAX_RETRIES - 1, error="timeout"),
    )
    Delivery.objects.filter(pk=deliveries[2].pk).update(confirmed=None, block_number=None, is_test=True)
    return list(Delivery.objects.newest_first())


def _lines(html: str) -> str:
    # The template loop put a line break and indentation between cells; the markup is otherwise the same.
    return re.sub(r"\s*\n\s*", "", html)


def _rows(html: str) -> str:
    """What the table's <tbody> holds."""
    return html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]


@pytest.mark.parametrize("with_next_retry", [False, True])
def test_the_rows_are_the_template_loops_rows(plain_source: Source, with_next_retry: bool) -> None:
    deliveries = _varied(plain_source)
    for shown in (deliveries, deliveries[1:2], []):
        for filtered in (False, True):
            context = {"deliveries": shown, "max_retries": MAX_RETRIES, "with_next_retry": with_next_retry,
                       "filtered": filtered}
            expected = REFERENCE.render(Context(context))
            assert _lines(_rows(CURRENT.render(Context(context)))) == _lines(expected)
    full = CURRENT.render(Context({"deliveries": deliveries, "max_retries": MAX_RETRIES}))
    assert "⟨U+202E⟩" in full and "&lt;img src=x" in full and "<img src=x" not in full
    assert full.count('<tr class="clickable"') == len(deliveries) == 4


def test_the_list_and_the_search_page_show_them(plain_source: Source, logged_in_client: Client) -> None:
    deliveries = _varied(plain_source)
    body = logged_in_client.get("/deliveries/").content.decode()
    assert body.count('<tr class="clickable"') == len(deliveries)
    assert "<img src=x" not in body and "⟨U+202E⟩" in body
    body = logged_in_client.get("/search/", {"q": TX}).content.decode()
    assert body.count('<tr class="clickable"') == len(deliveries)
    assert all(f'data-href="/deliveries/{d.pk}/"' in body for d in deliveries)
