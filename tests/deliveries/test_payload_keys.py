"""Search keys extracted from a payload."""

from __future__ import annotations

from dashboard.deliveries.payload_keys import search_keys


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


def test_event_names_are_the_event_keys_found_by_bisection() -> None:
    from dashboard.deliveries.payload_keys import event_names

    keys = sorted(["addr:0x01", "block:5", "event:approval", "event:transfer", "event:", "events:x", "eventz",
                   "event", "topic:0x02", "tx:0x03"])
    assert event_names(keys) == ("", "approval", "transfer")
    assert event_names(keys) == tuple(k[6:] for k in keys if k.startswith("event:"))
    assert event_names(["addr:0x01", "tx:0x03"]) == () and event_names([]) == ()
