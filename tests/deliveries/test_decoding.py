"""Decoding logs and inputs with the payload's ABI. The expected topics and selectors are the published
values of well-known contracts, and the log data is laid out word by word here, independently of eth-abi's
encoder, so a wrong signature, selector or argument order fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from dashboard.deliveries.decoding import Value, decode_input, decode_log, read_abi, token_amount, tokens
from dashboard.deliveries.payload_keys import search_keys

TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
APPROVAL = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"
TRANSFER_SINGLE = "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62"
TRANSFER_BATCH = "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb"
SWAP_V2 = "0xd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822"
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
ALICE = "0x" + "a1" * 20
BOB = "0x" + "b2" * 20
CAROL = "0x" + "c3" * 20


def w(value: int | str) -> str:
    """One 32-byte word: an int, or an address left-padded."""
    if isinstance(value, str):
        return value[2:].lower().rjust(64, "0")
    return f"{value:064x}"


def topic(value: int | str) -> str:
    return "0x" + w(value)


def inp(name: str, type_: str, indexed: bool = False, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "indexed": indexed, "internalType": type_, **extra}


ERC20_TRANSFER = {"type": "event", "name": "Transfer", "anonymous": False,
                  "inputs": [inp("from", "address", True), inp("to", "address", True), inp("value", "uint256")]}
ERC20_APPROVAL = {"type": "event", "name": "Approval", "anonymous": False,
                  "inputs": [inp("owner", "address", True), inp("spender", "address", True), inp("value", "uint256")]}
ERC721_TRANSFER = {"type": "event", "name": "Transfer", "anonymous": False,
                   "inputs": [inp("from", "address", True), inp("to", "address", True), inp("tokenId", "uint256", True)]}
TRANSFER_SINGLE_ABI = {"type": "event", "name": "TransferSingle", "anonymous": False, "inputs": [
    inp("operator", "address", True), inp("from", "address", True), inp("to", "address", True),
    inp("id", "uint256"), inp("value", "uint256")]}
TRANSFER_BATCH_ABI = {"type": "event", "name": "TransferBatch", "anonymous": False, "inputs": [
    inp("operator", "address", True), inp("from", "address", True), inp("to", "address", True),
    inp("ids", "uint256[]"), inp("values", "uint256[]")]}
SWAP_ABI = {"type": "event", "name": "Swap", "anonymous": False, "inputs": [
    inp("sender", "address", True), inp("amount0In", "uint256"), inp("amount1In", "uint256"),
    inp("amount0Out", "uint256"), inp("amount1Out", "uint256"), inp("to", "address", True)]}
TRANSFER_FN = {"type": "function", "name": "transfer", "stateMutability": "nonpayable",
               "inputs": [inp("to", "address"), inp("amount", "uint256")], "outputs": [inp("", "bool")]}
SWAP_FN = {"type": "function", "name": "swapExactTokensForTokens", "stateMutability": "nonpayable", "inputs": [
    inp("amountIn", "uint256"), inp("amountOutMin", "uint256"), inp("path", "address[]"), inp("to", "address"),
    inp("deadline", "uint256")], "outputs": [inp("amounts", "uint256[]")]}
ORDER_FN = {"type": "function", "name": "fill", "stateMutability": "nonpayable", "inputs": [
    {"name": "order", "type": "tuple", "internalType": "struct Order", "components": [
        inp("maker", "address"), inp("amounts", "uint256[]")]},
    inp("recipients", "address[2]")]}
OFFER_EVENT = {"type": "event", "name": "OfferMade", "anonymous": False, "inputs": [
    inp("memo", "string", True),
    {"name": "offer", "type": "tuple", "indexed": False, "components": [inp("maker", "address"), inp("ok", "bool")]},
    {"name": "legs", "type": "tuple[]", "indexed": False, "components": [inp("to", "address"), inp("amount", "int64")]}]}


def addresses(values: tuple[Value, ...]) -> Iterator[str]:
    """Every address among decoded values as the page shows them, tuples and arrays included."""
    for value in values:
        if value.kind == "address":
            yield value.value
        elif value.items:
            yield from addresses(value.items)


def args_of(decoded: Any) -> dict[str, Any]:
    return {a.name: (a.value if not a.items else [i.value if not i.items else [j.value for j in i.items] for i in a.items])
            for a in decoded.args}


def test_an_erc20_transfer_decodes_with_named_typed_arguments() -> None:
    abi = read_abi([ERC20_TRANSFER, ERC20_APPROVAL])
    log = {"address": USDC, "topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "topic3": None,
           "data": "0x" + w(1_250_000_000)}
    decoded = decode_log(abi, log)
    assert decoded.problem == ""
    assert decoded.name == "Transfer"
    assert decoded.item is not None and decoded.item.signature == "Transfer(address,address,uint256)"
    assert [(a.name, a.type, a.kind, a.indexed) for a in decoded.args] == [
        ("from", "address", "address", True), ("to", "address", "address", True), ("value", "uint256", "int", False)]
    assert args_of(decoded) == {"from": ALICE, "to": BOB, "value": 1_250_000_000}
    approval = decode_log(abi, {**log, "topic0": APPROVAL})
    assert approval.name == "Approval" and args_of(approval)["spender"] == BOB


def test_erc20_and_erc721_transfer_share_topic0_and_the_topics_choose() -> None:
    abi = read_abi([ERC20_TRANSFER, ERC721_TRANSFER])
    nft = decode_log(abi, {"topic0": TRANSFER, "topic1": topic(0), "topic2": topic(BOB), "topic3": topic(7041), "data": "0x"})
    assert nft.item is not None and nft.item.indexed_count == 3
    assert args_of(nft) == {"from": "0x" + "00" * 20, "to": BOB, "tokenId": 7041}
    only_721 = decode_log(read_abi([ERC721_TRANSFER]), {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB),
                                                       "data": "0x" + w(5)})
    assert only_721.item is None
    assert only_721.problem == "Transfer(address,address,uint256) has 3 indexed arguments, the log 2 topics after topic0"


def test_erc1155_single_and_batch_decode_arrays() -> None:
    abi = read_abi([TRANSFER_SINGLE_ABI, TRANSFER_BATCH_ABI])
    single = decode_log(abi, {"topic0": TRANSFER_SINGLE, "topic1": topic(CAROL), "topic2": topic(ALICE),
                              "topic3": topic(BOB), "data": "0x" + w(42) + w(3)})
    assert single.name == "TransferSingle"
    assert args_of(single) == {"operator": CAROL, "from": ALICE, "to": BOB, "id": 42, "value": 3}
    # ids at offset 0x40, values at 0x40 + 32 * (1 + 3)
    data = "0x" + w(0x40) + w(0xC0) + w(3) + w(1) + w(2) + w(3) + w(3) + w(10) + w(20) + w(30)
    batch = decode_log(abi, {"topic0": TRANSFER_BATCH, "topic1": topic(CAROL), "topic2": topic(ALICE),
                             "topic3": topic(BOB), "data": data})
    assert batch.name == "TransferBatch"
    assert args_of(batch) == {"operator": CAROL, "from": ALICE, "to": BOB, "ids": [1, 2, 3], "values": [10, 20, 30]}
    assert batch.args[3].kind == "array" and batch.args[3].items[0].type == "uint256"


def test_a_uniswap_v2_swap_keeps_the_declared_argument_order() -> None:
    router = "0x7a250d5630b4cf539739df2c5dacb4c659f2488d"
    decoded = decode_log(read_abi([SWAP_ABI]), {
        "address": "0xb4e16d0168e52d35cacd2c6185b44281ec28c9dc", "topic0": SWAP_V2, "topic1": topic(router),
        "topic2": topic(ALICE), "data": "0x" + w(0) + w(5 * 10**18) + w(9_876_543_210) + w(0)})
    assert [a.name for a in decoded.args] == ["sender", "amount0In", "amount1In", "amount0Out", "amount1Out", "to"]
    assert args_of(decoded) == {"sender": router, "amount0In": 0, "amount1In": 5 * 10**18,
                                "amount0Out": 9_876_543_210, "amount1Out": 0, "to": ALICE}


def test_tuples_tuple_arrays_and_hashed_indexed_strings() -> None:
    memo_hash = "0x" + "5e" * 32
    # offer (static tuple) inline: maker, ok; legs: offset 0x60; legs = [(BOB, -5), (CAROL, 7)]
    data = "0x" + w(ALICE) + w(1) + w(0x60) + w(2) + w(BOB) + w(2**256 - 5) + w(CAROL) + w(7)
    decoded = decode_log(read_abi([OFFER_EVENT]), {"topic0": read_topic0(OFFER_EVENT), "topic1": memo_hash, "data": data})
    assert decoded.problem == ""
    memo, offer, legs = decoded.args
    assert (memo.kind, memo.value, memo.indexed) == ("hash", memo_hash, True)
    assert offer.kind == "tuple" and offer.type == "(address,bool)"
    assert [(f.name, f.value) for f in offer.items] == [("maker", ALICE), ("ok", True)]
    assert legs.kind == "array" and legs.type == "(address,int64)[]"
    assert [[(f.name, f.value) for f in leg.items] for leg in legs.items] == [[("to", BOB), ("amount", -5)],
                                                                            [("to", CAROL), ("amount", 7)]]
    assert set(addresses(decoded.args)) == {ALICE, BOB, CAROL}


def read_topic0(entry: dict[str, Any]) -> str:
    item = read_abi([entry]).items[0]
    return "0x" + item.selector.hex()


def test_inputs_decode_into_function_and_arguments() -> None:
    abi = read_abi([TRANSFER_FN, SWAP_FN, ORDER_FN, ERC20_TRANSFER])
    call = decode_input(abi, "0xa9059cbb" + w(BOB) + w(10**6))
    assert call is not None and call.name == "transfer" and args_of(call) == {"to": BOB, "amount": 10**6}
    swap = decode_input(abi, "0x38ed1739" + w(10**18) + w(99) + w(0xA0) + w(ALICE) + w(1_700_000_000)
                        + w(2) + w(USDC) + w(CAROL))
    assert swap is not None and swap.name == "swapExactTokensForTokens"
    assert args_of(swap) == {"amountIn": 10**18, "amountOutMin": 99, "path": [USDC, CAROL], "to": ALICE,
                             "deadline": 1_700_000_000}
    selector = "0x" + abi.items[2].selector.hex()
    assert abi.items[2].signature == "fill((address,uint256[]),address[2])"
    # order is dynamic: its offset (0x60, after the two static recipients) comes first
    fill = decode_input(abi, selector + w(0x60) + w(BOB) + w(CAROL) + w(ALICE) + w(0x40) + w(2) + w(5) + w(7))
    assert fill is not None and fill.problem == ""
    assert args_of(fill) == {"order": [ALICE, [5, 7]], "recipients": [BOB, CAROL]}
    assert decode_input(abi, "0x") is None and decode_input(abi, None) is None and decode_input(abi, "") is None


def test_what_the_abi_does_not_match_says_why() -> None:
    abi = read_abi([ERC20_TRANSFER, TRANSFER_FN])
    log = {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "data": "0x" + w(1)}
    assert decode_log(abi, {**log, "topic0": SWAP_V2}).problem == "no event in the ABI has this topic0"
    assert decode_log(abi, {**log, "topic0": None}).problem == "the log has no topic0 (an anonymous event)"
    assert decode_log(abi, {**log, "data": "0x1234"}).problem.startswith(
        "the log does not decode as Transfer(address,address,uint256): ")
    assert decode_log(abi, {**log, "data": "nothex"}).problem == "the data is not hex"
    assert decode_log(abi, {**log, "topic1": "0x12"}).problem == "a topic is not 32 bytes of hex"
    # an address topic with non-zero padding is not an address
    assert decode_log(abi, {**log, "topic1": "0x" + "ff" * 32}).problem.startswith("the log does not decode")
    assert decode_log(abi, {**log, "data": "0x" + "00" * (70 * 1024)}).problem.endswith("more than this page decodes")
    assert decode_log(read_abi(None), log).problem == "no event in the ABI has this topic0"
    assert decode_input(abi, "0xdeadbeef").problem == "no function in the ABI has the selector 0xdeadbeef"  # type: ignore[union-attr]
    assert decode_input(abi, "0xa9059cbb" + w(BOB)).problem.startswith(  # type: ignore[union-attr]
        "the input does not decode as transfer(address,uint256): ")
    assert decode_input(abi, "0xa905").problem == "the input is shorter than a function selector"  # type: ignore[union-attr]
    assert decode_input(abi, "0xzz").problem == "the input is not hex"  # type: ignore[union-attr]


def test_anonymous_events_are_not_matched_and_say_so() -> None:
    anon = {**ERC20_TRANSFER, "anonymous": True}
    abi = read_abi([anon])
    assert abi.anonymous and not abi.events
    log = {"topic0": topic(ALICE), "topic1": topic(BOB), "data": "0x" + w(1)}
    assert decode_log(abi, log).problem == (
        "no event in the ABI has this topic0 (the ABI's anonymous events cannot be matched by topic)")
    assert "anonymous events carry no topic" in decode_log(abi, {"data": "0x"}).problem


def test_malformed_and_hostile_abi_entries_are_listed_and_the_rest_still_decodes() -> None:
    hostile = [
        "not an object",
        {"type": "event", "name": "<script>alert(1)</script>", "inputs": []},
        {"type": "event", "name": "Bad", "inputs": [inp("x", "uint7")]},
        {"type": "event", "name": "NoParts", "inputs": [{"name": "t", "type": "tuple"}]},
        {"type": "event", "name": "Deep", "inputs": [{"name": "t", "type": "tuple", "components": [
            {"name": "u", "type": "tuple", "components": [{"name": "v", "type": "tuple", "components": [
                {"name": "w", "type": "tuple", "components": [{"name": "x", "type": "tuple", "components": [
                    {"name": "y", "type": "tuple", "components": [{"name": "z", "type": "tuple", "components": [
                        {"name": "q", "type": "tuple", "components": [inp("r", "uint8")]}]}]}]}]}]}]}]}]},
        {"type": "event", "name": "Many", "inputs": [inp(f"a{i}", "uint8", True) for i in range(4)]},
        {"type": "function", "name": "f", "inputs": "uint256"},
        {"type": "event", "name": "Weird", "inputs": [{"name": "x", "type": "address", "indexed": "yes"}]},
        {"type": "sorcery", "name": "x"},
        {"type": "event", "name": "x" * 5000, "inputs": []},
        {"type": "constructor", "inputs": [inp("owner", "address")]},
        ERC20_TRANSFER,
    ]
    abi = read_abi(hostile)
    reasons = {p.position: p.reason for p in abi.problems}
    assert reasons == {
        0: "the entry is not an object",
        1: "the event has no valid name",
        2: "the type “uint7” is not an ABI type",
        3: "the tuple t has no list of components",
        4: "tuples nest deeper than 8 levels",
        5: "more indexed arguments than a log has topics",
        6: "the inputs are not a list",
        7: "“indexed” of x is not true or false",
        8: "the entry's type is not event, function, constructor, fallback, receive or error",
        9: "a name is longer than 200 characters",
    }
    assert abi.problems[1].name == "<script>alert(1)</script>"
    log = {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "data": "0x" + w(1)}
    assert decode_log(abi, log).name == "Transfer"
    assert read_abi({"not": "a list"}).events == {}


def test_hostile_sizes_finish_quickly() -> None:
    abi = read_abi([
        {"type": "event", "name": "Huge", "inputs": [inp("a", "uint256[4294967295]")]},
        {"type": "event", "name": "Nested", "inputs": [inp("a", "uint256[][][][][][][][]")]},
        {"type": "function", "name": "g", "inputs": [inp("b", "bytes")]},
    ])
    started = time.monotonic()
    for item in abi.events.values():
        for data in ("0x", "0x" + w(0x20) + w(2**255), "0x" + (w(0x20) * 2000)):
            assert decode_log(abi, {"topic0": "0x" + item[0].selector.hex(), "data": data}).problem
    g = "0x" + abi.items[2].selector.hex()
    assert decode_input(abi, g + w(0x20) + w(2**200)).problem  # type: ignore[union-attr]
    assert time.monotonic() - started < 2


def test_token_amounts_use_the_payload_decimals() -> None:
    payload = {"erc20Transfers": [
        {"contract": USDC.upper().replace("0X", "0x"), "tokenDecimals": "6", "tokenSymbol": "USDC"},
        {"contract": "0x" + "11" * 20, "tokenDecimals": "lots", "tokenSymbol": "BAD"},
    ], "erc20Approvals": [{"contract": "0x" + "22" * 20, "tokenDecimals": 18, "tokenSymbol": None}]}
    found = tokens(payload)
    assert set(found) == {USDC, "0x" + "22" * 20}
    assert (found[USDC].decimals, found[USDC].symbol) == (6, "USDC")
    assert token_amount(1_250_000_000, 6) == "1,250"
    assert token_amount(1_250_500_000, 6) == "1,250.5"
    assert token_amount(1, 6) == "0.000001"
    assert token_amount(-15, 1) == "-1.5"
    assert token_amount(7, 0) == "7"


def test_decoded_events_and_addresses_become_search_keys() -> None:
    payload = {
        "abi": [ERC20_TRANSFER, TRANSFER_FN, ORDER_FN],
        "logs": [{"address": USDC, "topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "data": "0x" + w(9)},
                 {"address": USDC, "topic0": SWAP_V2, "data": "0x"}],
        "txs": [{"hash": "0x" + "01" * 32, "input": "0xa9059cbb" + w(CAROL) + w(1)}],
    }
    keys = set(search_keys(payload, None))
    assert {"event:transfer", f"addr:{ALICE}", f"addr:{BOB}", f"addr:{CAROL}", f"addr:{USDC}"} <= keys
    assert not any(k.startswith("event:swap") for k in keys)
    assert all(len(k) <= 80 for k in keys)


def test_a_string_that_is_not_utf8_decodes_with_replacement_characters() -> None:
    note = {"type": "event", "name": "Note", "anonymous": False, "inputs": [inp("text", "string")]}
    data = "0x" + w(0x20) + w(3) + "ff6869".ljust(64, "0")
    decoded = decode_log(read_abi([note]), {"topic0": read_topic0(note), "data": data})
    assert decoded.problem == "" and decoded.args[0].value == "\ufffdhi"


# Type lists of both kinds: all static (decoded value by value, without eth-abi's pointer pass) and with
# dynamic parts (eth-abi's tuple decoder as it is).
CODEC_CASES: list[tuple[tuple[str, ...], tuple[Any, ...]]] = [
    (("address", "address", "uint256"), (ALICE, BOB, 10**30)),
    (("uint8", "int16", "bool", "bytes4", "bytes32"), (255, -300, True, b"\x01\x02\x03\x04", b"\xaa" * 32)),
    (("int256", "uint64[3]", "(address,bool)"), (-(2**200), [1, 2, 3], (CAROL, False))),
    (("uint256", "address[]", "string", "bytes"), (7, [ALICE, BOB], "héllo", b"\x00\xff" * 20)),
    (("(address,uint256[])", "address[2]"), ((ALICE, [1, 2]), [BOB, CAROL])),
]


def _outcome(decode: Any, types: tuple[str, ...], data: bytes) -> tuple[str, Any]:
    try:
        return "value", decode(types, data)
    except Exception as exc:  # noqa: BLE001 - the kind and the text of the error are what is compared
        return type(exc).__name__, str(exc)


def test_the_decoder_built_once_per_type_list_answers_exactly_as_eth_abi() -> None:
    import random

    from eth_abi import encode
    from eth_abi.codec import ABICodec

    from dashboard.deliveries.decoding import REGISTRY, tuple_decoder

    codec = ABICodec(REGISTRY)
    rng = random.Random(5)
    compared = 0
    for types, values in CODEC_CASES:
        data = encode(list(types), list(values))
        variants = [data, data[:-1], data[:-32], data + b"\x00" * 32, b""]
        for _ in range(60):
            # one byte changed: padding that is not zero, a bool of 2, an offset or a length out of range
            at = rng.randrange(len(data))
            variants.append(data[:at] + bytes([rng.randrange(256)]) + data[at + 1:])
        for variant in variants:
            expected = _outcome(codec.decode, types, variant)
            assert _outcome(lambda t, d: tuple_decoder(t)(d), types, variant) == expected, (types, variant.hex())
            compared += 1
    assert compared == len(CODEC_CASES) * 65
    # the changed bytes reached both outcomes: values and each kind of refusal
    kinds = {_outcome(codec.decode, t, encode(list(t), list(v))[:-1])[0] for t, v in CODEC_CASES}
    assert "value" not in kinds


def test_logs_decode_the_same_once_the_item_layout_is_cached() -> None:
    abi = read_abi([ERC20_TRANSFER, ERC721_TRANSFER, SWAP_ABI])
    log = {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "topic3": None, "data": "0x" + w(9)}
    first, again = decode_log(abi, log), decode_log(abi, log)
    assert first == again and args_of(first) == {"from": ALICE, "to": BOB, "value": 9}
    # a bad padding in an indexed address topic is refused, as eth-abi refuses it
    bad = decode_log(abi, {**log, "topic1": "0x" + "ff" * 12 + w(ALICE)[24:]})
    assert bad.item is None and "Padding bytes were not empty" in bad.problem


NESTED_EVENT = {"type": "event", "name": "Routed", "anonymous": False, "inputs": [
    inp("operator", "address", True), inp("tag", "string", True), inp("hops", "address[]"),
    {"name": "legs", "type": "tuple[]", "indexed": False, "components": [
        inp("to", "address"), {"name": "via", "type": "tuple", "components": [inp("pool", "address"), inp("fee", "uint24")]},
        inp("amount", "uint256")]},
    inp("pair", "address[2]"), inp("note", "string")]}
BATCH_FN = {"type": "function", "name": "multiSend", "stateMutability": "nonpayable", "inputs": [
    inp("targets", "address[]"), inp("amounts", "uint256[]"),
    {"name": "orders", "type": "tuple[]", "components": [inp("maker", "address"), inp("takers", "address[]")]},
    inp("memo", "bytes")], "outputs": []}


def _address(rng: Any) -> str:
    return "0x" + bytes(rng.randrange(256) for _ in range(20)).hex()


def test_addresses_read_from_raw_values_are_those_of_the_decoded_arguments() -> None:
    """`log_addresses`/`input_addresses` (what search keys use) answer as `addresses(decode_…(…).args)` for
    logs and inputs that decode, arrays beyond ARRAY_ITEMS, nested tuples and hashed indexed arguments
    included, and None for each that does not."""
    import random

    from eth_abi import encode

    from dashboard.deliveries.decoding import ARRAY_ITEMS, input_addresses, log_addresses

    rng = random.Random(11)
    abi = read_abi([NESTED_EVENT, BATCH_FN, ERC20_TRANSFER, ERC721_TRANSFER, TRANSFER_FN, SWAP_FN, ORDER_FN])
    routed = read_topic0(NESTED_EVENT)
    multi_send = "0x" + read_abi([BATCH_FN]).items[0].selector.hex()
    decoded_logs = decoded_inputs = refused = 0
    for round_ in range(120):
        hops = [_address(rng) for _ in range(rng.choice([0, 1, 3, ARRAY_ITEMS, ARRAY_ITEMS + 7]))]
        legs = [(_address(rng), (_address(rng), rng.randrange(2**24)), rng.randrange(2**256))
                for _ in range(rng.choice([0, 2, ARRAY_ITEMS + 1]))]
        data = encode(["address[]", "(address,(address,uint24),uint256)[]", "address[2]", "string"],
                      [hops, legs, [_address(rng), _address(rng)], "memo"])
        if round_ % 4 == 3:  # one byte changed: some still decode, some are refused
            at = rng.randrange(len(data))
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        logs = [
            {"topic0": routed, "topic1": topic(_address(rng)), "topic2": "0x" + "5e" * 32, "data": "0x" + data.hex()},
            {"topic0": routed, "topic1": topic(_address(rng)), "data": "0x" + data.hex()},  # a topic missing
            {"topic0": TRANSFER, "topic1": topic(_address(rng)), "topic2": topic(_address(rng)), "data": "0x" + w(5)},
            {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "topic3": topic(7), "data": "0x"},
            {"topic0": TRANSFER, "topic1": "0x" + "ff" * 12 + w(ALICE)[24:], "topic2": topic(BOB), "data": "0x" + w(1)},
        ]
        for log in logs:
            decoded, picked = decode_log(abi, log), log_addresses(abi, log)
            if decoded.item is None:
                assert picked is None, log
                refused += 1
            else:
                assert picked == (decoded.item, list(addresses(decoded.args))), log
                decoded_logs += 1
        orders = [(_address(rng), [_address(rng) for _ in range(rng.choice([0, 2, ARRAY_ITEMS + 3]))])
                  for _ in range(rng.choice([1, 3]))]
        call = multi_send + encode(["address[]", "uint256[]", "(address,address[])[]", "bytes"],
                                   [hops, [1, 2], orders, b"\x01\x02"]).hex()
        for data_hex in (call, call[:-2], call + "\n", "0xa9059cbb" + w(_address(rng)) + w(3), "0xdeadbeef", "0x12", ""):
            decoded_call, picked_call = decode_input(abi, data_hex), input_addresses(abi, data_hex)
            if decoded_call is None or decoded_call.item is None:
                assert picked_call is None, data_hex
                refused += 1
            else:
                assert picked_call == (decoded_call.item, list(addresses(decoded_call.args))), data_hex
                decoded_inputs += 1
    assert decoded_logs > 200 and decoded_inputs > 200 and refused > 500
    # arrays are cut where the page cuts them: ARRAY_ITEMS hops, not more
    long_hops = [_address(rng) for _ in range(ARRAY_ITEMS + 50)]
    data = encode(["address[]", "(address,(address,uint24),uint256)[]", "address[2]", "string"],
                  [long_hops, [], [ALICE, BOB], ""])
    picked = log_addresses(abi, {"topic0": routed, "topic1": topic(CAROL), "topic2": "0x" + "00" * 32,
                                 "data": "0x" + data.hex()})
    assert picked is not None and picked[0].name == "Routed"
    assert picked[1] == [CAROL, *long_hops[:ARRAY_ITEMS], ALICE, BOB]


def test_hex_that_is_odd_or_has_a_trailing_newline_is_not_decoded() -> None:
    abi = read_abi([ERC20_TRANSFER, TRANSFER_FN])
    log = {"topic0": TRANSFER, "topic1": topic(ALICE), "topic2": topic(BOB), "data": "0x" + w(9)}
    assert decode_log(abi, log).problem == ""
    for data in ("0x" + w(9) + "\n", "0x" + w(9)[1:], "0x" + w(9)[:-2] + "zz", "0X" + w(9)):
        assert decode_log(abi, {**log, "data": data}).problem == "the data is not hex", data
    for data_hex in ("0xa9059cbb" + w(BOB) + w(1) + "\n", "0xa9059cbb" + w(BOB) + w(1)[1:]):
        call = decode_input(abi, data_hex)
        assert call is not None and call.problem == "the input is not hex"
