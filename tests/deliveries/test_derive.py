"""Status, error templates and search keys derived from one upstream record."""

from __future__ import annotations

import pytest

from dashboard.deliveries.derive import delivery_status, error_fingerprint, error_template, search_keys


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


def test_status_follows_error_and_retries() -> None:
    assert delivery_status("", 3) == "delivered"
    assert delivery_status("socket hang up", 2) == "retrying"
    assert delivery_status("socket hang up", 7) == "failed"


def test_search_keys_cover_logs_txs_internal_txs_transfers_and_triggers() -> None:
    tx = "0x" + "Ab" * 32
    addr = "0x" + "CD" * 20
    other = "0x" + "ef" * 20
    topic = "0x" + "12" * 32
    payload = {
        "logs": [{"transactionHash": tx, "address": addr, "topic0": topic, "triggers": [{"name": "x", "value": other}]}],
        "txs": [{"hash": tx, "fromAddress": addr, "toAddress": None}],
        "txsInternal": [{"transactionHash": tx, "from": "0x" + "01" * 20, "to": "0x" + "02" * 20}],
        "erc20Transfers": [{"transactionHash": tx, "contract": "0x" + "03" * 20, "from": addr, "to": other}],
        "nftTransfers": [{"transactionHash": "0x" + "99" * 32, "to": "0x" + "04" * 20}],
        "unknownKey": {"anything": [1, 2]},
    }
    keys = set(search_keys(payload, 1234))
    assert f"tx:{tx.lower()}" in keys
    assert f"addr:{addr.lower()}" in keys and f"addr:{other}" in keys
    assert f"topic:{topic}" in keys
    assert {"addr:0x" + "01" * 20, "addr:0x" + "02" * 20, "addr:0x" + "03" * 20, "addr:0x" + "04" * 20} <= keys
    assert "tx:0x" + "99" * 32 in keys
    assert "block:1234" in keys
    assert all(k == k.lower() for k in keys)


def test_search_keys_survive_odd_payloads() -> None:
    assert search_keys(None, None) == []
    assert search_keys({"logs": "nope", "txs": [None, 3, {"hash": 5}]}, None) == []
