"""Error templates: messages that differ only in their variable parts fall in one group."""

from __future__ import annotations

import pytest

from dashboard.deliveries.grouping import error_fingerprint, error_template


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("connect ECONNREFUSED 203.0.113.7:443", "connect ECONNREFUSED 198.51.100.2:443"),
        ("connect ECONNREFUSED [2001:db8::1]:443", "connect ECONNREFUSED [2001:db8::2]:8443"),
        ("timeout of 10000ms exceeded", "timeout of 5000ms exceeded"),
        ("getaddrinfo ENOTFOUND hooks.example.com", "getaddrinfo ENOTFOUND api.other-host.io"),
        ("POST https://a.example.com/hook?id=1 failed", "POST https://b.example.org/x failed"),
        ("delivery 3f2a1c9e-1b2c-4d5e-8f90-123456789abc failed", "delivery 00000000-1b2c-4d5e-8f90-aaaaaaaaaaaa failed"),
        ("reverted at 0xAbC0000000000000000000000000000000000001", "reverted at 0x00000000000000000000000000000000000000ff"),
        ("nonce 0x1f too low", "nonce 0xdeadbeef too low"),
        ("took 1.5s after 3 attempts", "took 20 s after 7 attempts"),
        ("request id abcdef0123456789 rejected", "request id 9f8e7d6c5b4a3210 rejected"),
    ],
)
def test_it_groups_messages_that_differ_only_in_variable_parts(a: str, b: str) -> None:
    assert error_template(a) == error_template(b)
    assert error_fingerprint(error_template(a)) == error_fingerprint(error_template(b))


def test_it_keeps_http_status_codes_apart() -> None:
    assert error_template("Request failed with status code 500") == "Request failed with status code 500"
    assert error_template("Request failed with status code 404") != error_template(
        "Request failed with status code 500"
    )


def test_it_keeps_fixed_texts() -> None:
    for text in ("socket hang up", "certificate has expired", "Stream is in error state"):
        assert error_template(text) == text


def test_the_template_masks_ips_with_ports() -> None:
    assert error_template("connect ECONNREFUSED 203.0.113.7:443") == "connect ECONNREFUSED <ip>"
