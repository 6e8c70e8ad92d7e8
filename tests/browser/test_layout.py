"""Layout in Chromium at the widths operators use, and hostile upstream text that must never run.
Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.deliveries.ingest import store_records
from dashboard.sources.models import Source
from tests.browser.fixtures import screenshot
from tests.browser.test_dashboard import filled  # noqa: F401
from tests.web.conftest import default_payload, record

pytestmark = pytest.mark.browser

MAIN_PAGES = ["/", "/streams/", "/timeline/", "/deliveries/", "/errors/", "/retries/", "/search/",
              "/lookups/owners/", "/lookups/creators/"]
HOSTILE = '<script>alert("x")</script>"><img src=x onerror=alert(2)>'
ODD = "\u202egnp.exe\u200b😀"
HOSTILE_ID = "aaaaaaaa-0000-4000-8000-000000000001"


def _store_hostile(source: Source) -> None:
    payload = default_payload(100, "0x1")
    payload["logs"][0]["triggers"] = [{"name": HOSTILE, "value": HOSTILE}]
    payload["nftTransfers"][0]["tokenName"] = HOSTILE + ODD
    payload["tag"] = HOSTILE
    payload["abi"].append({"type": "event", "name": HOSTILE, "inputs": [{"type": HOSTILE, "name": HOSTILE}]})
    hostile = record(
        tag="hostile " + HOSTILE + ODD, url="https://evil.example.com/" + HOSTILE + "?a=" + "b" * 400,
        error="Request failed " + HOSTILE + ODD, retries=3, payload=payload,
    )
    hostile["id"] = HOSTILE_ID
    result = store_records(source, [hostile])
    assert not result.rejected


def _hidden_nav_links(page: Any) -> list[str]:
    """The navigation links that cannot be seen and clicked (scrolled out of sight or covered)."""
    return page.evaluate(
        "() => [...document.querySelectorAll('.mainnav a')].filter(a => {"
        " const r = a.getBoundingClientRect();"
        " return !a.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); })"
        ".map(a => a.textContent.trim())"
    )


def test_every_page_keeps_its_links_and_columns_at_1024_pixels(page: Any, filled: Source) -> None:  # noqa: F811
    _store_hostile(filled)
    page.set_viewport_size({"width": 1024, "height": 900})
    for path in [*MAIN_PAGES, f"/deliveries/{HOSTILE_ID}/"]:
        assert page.goto(path).status == 200, path
        assert _hidden_nav_links(page) == [], path
        # Nothing widens the page itself; wide tables scroll inside their panel.
        assert page.evaluate("document.documentElement.scrollWidth") <= 1024, path
        for panel in page.locator(".panel").all():
            clipped = panel.evaluate(
                "p => p.scrollWidth > p.clientWidth + 1 && getComputedStyle(p).overflowX === 'hidden'"
            )
            assert not clipped, path
        screenshot(page, "narrow" + path.strip("/").replace("/", "-")[:40])


def test_the_deliveries_table_fits_at_1440_pixels_with_long_upstream_text(page: Any, filled: Source) -> None:  # noqa: F811
    _store_hostile(filled)
    # Whatever the fallback font's width (DejaVu Sans, the widest common one, on Debian), every link of the
    # navigation stays visible beside or above the search box.
    for width in (1440, 1366, 1301):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto("/deliveries/")
        assert _hidden_nav_links(page) == [], width
    page.set_viewport_size({"width": 1440, "height": 900})
    # At 1440 px no panel of a main page needs its horizontal scroll bar.
    for path in MAIN_PAGES:
        page.goto(path)
        wide = page.evaluate(
            "() => [...document.querySelectorAll('.panel')].filter(p => p.scrollWidth > p.clientWidth + 1)"
            ".map(p => (p.querySelector('table') || p).id || p.className)"
        )
        assert wide == [], path
    page.goto("/deliveries/")
    fits = page.evaluate(
        "() => { const t = document.querySelector('#deliveries-table');"
        " return t.getBoundingClientRect().right <= t.parentElement.closest('.panel').getBoundingClientRect().right + 1; }"
    )
    assert fits
    error_cell = page.locator("#deliveries-table td.fill").first
    assert error_cell.bounding_box()["width"] >= 150
    page.goto("/retries/")
    assert page.locator("#still-failing td.fill").first.bounding_box()["height"] < 40  # one line, not a column of words


def test_hostile_upstream_text_never_runs(page: Any, filled: Source) -> None:  # noqa: F811
    _store_hostile(filled)
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    for path in [*MAIN_PAGES, f"/deliveries/{HOSTILE_ID}/", "/deliveries/?tag=" + HOSTILE,
                 "/deliveries/?error=" + HOSTILE, "/search/?q=" + HOSTILE]:
        page.goto(path)
        page.wait_for_timeout(100)
    page.goto(f"/deliveries/{HOSTILE_ID}/")
    page.click("text=Expand all")
    assert "⟨U+202E⟩" in page.content()
    screenshot(page, "hostile-delivery")
    assert dialogs == [] and errors == []
    assert page.evaluate("document.querySelectorAll('img[src=x], main script').length") == 0


def test_a_long_url_or_tag_in_the_filters_wraps_instead_of_widening_the_page(page: Any, filled: Source) -> None:  # noqa: F811
    for path in ("/timeline/?url=https://hooks.example.com/" + "x" * 2000, "/errors/?tag=" + "t" * 255,
                 "/deliveries/?status=" + "x" * 3000):
        page.goto(path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1440, path[:40]
