"""The simulator's payloads are true to themselves: real ABI entries, logs and inputs encoded from them,
transfer lists that agree with the logs, and tags that name what the stream delivers. Decoded here with
the dashboard's decoder, and the simplest values checked word by word without any ABI library."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from dashboard.deliveries.decoding import decode_input, decode_log, read_abi
from dashboard.simulator import catalog
from dashboard.simulator.payloads import with_decimals
from dashboard.simulator.world import World
from tests.simulator import schemas
from tests.simulator.conftest import make_config

TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
APPROVAL = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"
TRANSFER_SINGLE = "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62"
TRANSFER_BATCH = "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb"
SWAP_V2 = "0xd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822"
ORDER_FULFILLED = "0x9d9af8e38d66c62e2c12f0225249fd9d721c54b83f48d9352c97c6cacdcb6f31"


@pytest.fixture(scope="module")
def payloads() -> dict[str, list[dict[str, Any]]]:
    """Every stream's payloads of the simulated history, by tag."""
    by_tag: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in World(make_config(streams=8)).history_records(include_payload=True):
        by_tag[record["tag"]].append(record["payload"])
    return by_tag


def args(decoded: Any) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if value.kind == "tuple":
            return tuple(plain(i) for i in value.items)
        if value.kind == "array":
            return [plain(i) for i in value.items]
        return value.value

    return {a.name: plain(a) for a in decoded.args}


def test_every_log_and_input_decodes_with_the_payload_abi(payloads: dict[str, list[dict[str, Any]]]) -> None:
    abi_item = schemas.validator("streams.json", "AbiItem")
    seen_events: set[str] = set()
    for tag, items in payloads.items():
        for payload in items:
            abi = read_abi(payload["abi"])
            assert not abi.problems, (tag, abi.problems)
            for entry in payload["abi"]:
                assert [e.message for e in abi_item.iter_errors(entry)] == []
            for log in payload["logs"]:
                decoded = decode_log(abi, log)
                assert decoded.problem == "", (tag, decoded.problem)
                seen_events.add(decoded.name)
            if abi.functions:
                for tx in payload["txs"]:
                    call = decode_input(abi, tx["input"])
                    assert call is not None and call.problem == "", (tag, call)
    assert seen_events == {"Transfer", "Approval", "TransferSingle", "TransferBatch", "Swap", "OrderFulfilled"}


def test_tags_name_what_the_streams_deliver(payloads: dict[str, list[dict[str, Any]]]) -> None:
    usdc = {t.address for t in catalog.ERC20_TOKENS if t.symbol == "USDC"}
    usdt = {t.address for t in catalog.ERC20_TOKENS if t.symbol == "USDT"}
    transfers = [t for p in payloads["usdc-transfers"] for t in p["erc20Transfers"] + p["erc20Approvals"]]
    assert transfers and {t["contract"] for t in transfers} <= usdc
    assert {t["tokenSymbol"] for t in transfers} == {"USDC"}
    assert {t["contract"] for p in payloads["bsc-usdt-payments"] for t in p["erc20Transfers"]} <= usdt
    erc1155 = payloads["polygon-erc1155-transfers"]
    assert {log["topic0"] for p in erc1155 for log in p["logs"]} == {TRANSFER_SINGLE, TRANSFER_BATCH}
    assert {t["tokenContractType"] for p in erc1155 for t in p["nftTransfers"]} == {"ERC1155"}
    mints = [t for p in payloads["arbitrum-mints"] for t in p["nftTransfers"]]
    assert mints and {t["from"] for t in mints} == {"0x" + "00" * 20}
    deposits = [tx for p in payloads["avax-deposits"] for tx in p["txs"]]
    assert deposits and {tx["triggers"][0]["value"] for tx in deposits} == {"in"}
    sales = [log["topic0"] for p in payloads["nft-sales"] for log in p["logs"]]
    assert sales.count(ORDER_FULFILLED) * 2 == len(sales)  # each sale: the item's transfer and the order


def test_erc20_logs_agree_with_the_transfer_lists_word_by_word(payloads: dict[str, list[dict[str, Any]]]) -> None:
    checked = 0
    for payload in payloads["usdc-transfers"] + payloads["bsc-usdt-payments"]:
        logs = {log["logIndex"]: log for log in payload["logs"]}
        for item, topic0, parties in [(t, TRANSFER, ("from", "to")) for t in payload["erc20Transfers"]] + [
            (t, APPROVAL, ("owner", "spender")) for t in payload["erc20Approvals"]
        ]:
            log = logs[item["logIndex"]]
            assert log["topic0"] == topic0 and log["address"] == item["contract"]
            assert log["topic1"] == "0x" + item[parties[0]][2:].rjust(64, "0")
            assert log["topic2"] == "0x" + item[parties[1]][2:].rjust(64, "0")
            assert int(log["data"], 16) == int(item["value"])
            assert item["valueWithDecimals"] == with_decimals(int(item["value"]), int(item["tokenDecimals"]))
            checked += 1
    assert checked > 20
    assert with_decimals(1_250_500_000, 6) == "1250.5" and with_decimals(10**18, 18) == "1"


def test_nft_transfers_agree_with_their_logs(payloads: dict[str, list[dict[str, Any]]]) -> None:
    checked = 0
    for tag in ("nft-sales", "polygon-erc1155-transfers", "arbitrum-mints"):
        for payload in payloads[tag]:
            abi = read_abi(payload["abi"])
            logs = {log["logIndex"]: decode_log(abi, log) for log in payload["logs"]}
            for item in payload["nftTransfers"]:
                decoded = logs[item["logIndex"]]
                values = args(decoded)
                assert (values["from"], values["to"]) == (item["from"], item["to"])
                if decoded.name == "Transfer":
                    assert values["tokenId"] == int(item["tokenId"]) and item["amount"] == "1"
                elif decoded.name == "TransferSingle":
                    assert (values["id"], values["value"]) == (int(item["tokenId"]), int(item["amount"]))
                else:
                    assert (int(item["tokenId"]), int(item["amount"])) in zip(values["ids"], values["values"], strict=True)
                checked += 1
    assert checked > 20


def test_a_sale_is_an_order_the_item_and_the_payment_agree_on(payloads: dict[str, list[dict[str, Any]]]) -> None:
    for payload in payloads["nft-sales"]:
        abi = read_abi(payload["abi"])
        txs = {tx["hash"]: tx for tx in payload["txs"]}
        for log in payload["logs"]:
            decoded = decode_log(abi, log)
            if decoded.name != "OrderFulfilled":
                continue
            order = args(decoded)
            tx = txs[log["transactionHash"]]
            ((item_type, token, identifier, amount),) = order["offer"]
            paid = sum(c[3] for c in order["consideration"])
            assert paid == int(tx["value"]) and order["recipient"] == tx["fromAddress"]
            (parameters,) = args(decode_input(abi, tx["input"])).values()
            assert decode_input(abi, tx["input"]).name == "fulfillBasicOrder"  # type: ignore[union-attr]
            assert (parameters[3], parameters[5], parameters[6], parameters[7]) == (order["offerer"], token, identifier, amount)
            assert item_type in (2, 3)


def test_a_swap_log_and_its_router_call_agree(payloads: dict[str, list[dict[str, Any]]]) -> None:
    for payload in payloads["uniswap-v2-swaps"]:
        abi = read_abi(payload["abi"])
        txs = {tx["hash"]: tx for tx in payload["txs"]}
        for log in payload["logs"]:
            assert log["topic0"] == SWAP_V2
            swap = args(decode_log(abi, log))
            tx = txs[log["transactionHash"]]
            call = decode_input(abi, tx["input"])
            assert call is not None
            values = args(call)
            if call.name == "swapExactETHForTokens":
                assert int(tx["value"]) in (swap["amount0In"], swap["amount1In"])
                assert values["to"] == swap["to"] == tx["fromAddress"]
                assert values["amountOutMin"] <= max(swap["amount0Out"], swap["amount1Out"])
            else:
                assert call.name == "swapExactTokensForETH" and tx["value"] == "0"
                assert values["amountIn"] in (swap["amount0In"], swap["amount1In"])
            assert len(values["path"]) == 2
