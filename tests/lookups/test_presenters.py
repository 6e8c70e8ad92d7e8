"""What the lookup tables compute from records: safe URLs, royalties, supply."""

from __future__ import annotations

import pytest

from dashboard.lookups.presenters import royalty_percent, supply_text, web_url


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://example.com/a.png", "https://example.com/a.png"),
        ("  http://example.com/a.png ", "http://example.com/a.png"),
        ("ipfs://QmCid/1.png", "https://ipfs.io/ipfs/QmCid/1.png"),
        ("ipfs://ipfs/QmCid/1.png", "https://ipfs.io/ipfs/QmCid/1.png"),
        ("ar://abc/1.json", "https://arweave.net/abc/1.json"),
        ("javascript:alert(1)", None),
        ("JaVaScRiPt:alert(1)", None),
        (" javascript:alert(1)", None),
        ("java\tscript:alert(1)", None),
        ("data:image/png;base64,AAAA", None),
        ("vbscript:msgbox", None),
        ("//evil.example/x.png", None),
        ("https://", None),
        ("", None),
        (None, None),
        (42, None),
        ("https://example.com/" + "a" * 3000, None),
    ],
)
def test_web_url_keeps_only_http_urls(value: object, expected: str | None) -> None:
    assert web_url(value) == expected


def test_royalty_is_a_percentage() -> None:
    assert royalty_percent(25, 1000) == "2.5 %"
    assert royalty_percent(5, 100) == "5 %"
    assert royalty_percent(0, 10000) == "0 %"
    assert royalty_percent(1, 3) == "33.33 %"
    assert royalty_percent(5, 0) is None
    assert royalty_percent(None, 100) is None


def test_supply_against_maximum() -> None:
    assert supply_text(3, 2**64 - 1) == "3 / unlimited"
    assert supply_text(1200, 10000) == "1,200 / 10,000"
    assert supply_text(None, None) == "? / ?"
