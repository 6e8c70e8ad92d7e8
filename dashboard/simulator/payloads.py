"""The EVM webhook body of one block of one stream, as the provider sends it.

Every stream's payload carries real JSON ABI entries of the contracts it watches (ERC-20, ERC-721,
ERC-1155, a Uniswap V2 pair and its router, Seaport), and its logs and transaction inputs are encoded
from those entries with eth-abi, so decoding a payload with its own ABI gives back exactly the values
drawn here, and those agree with the payload's transfer lists (erc20Transfers, nftTransfers…).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from eth_abi import encode
from eth_utils import collapse_if_tuple, event_signature_to_log_topic, function_signature_to_4byte_selector

from dashboard.simulator import catalog, entropy

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
WETH = "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2"
SWAP_ROUTER = "0x7a250d5630b4cf539739df2c5dacb4c659f2488d"  # Uniswap V2 Router02
SEAPORT = "0x00000000000000adc04c56bf30ac9d3c0aaf14dc"  # Seaport 1.5
OPENSEA_CONDUIT = "0x1e0049783f008a0085193e00003d00cd54003c71"
OPENSEA_FEES = "0x0000a26b00c1f0df003000390027140000faa719"


@dataclass(frozen=True)
class Pair:
    address: str
    token0: tuple[str, str, int]  # address, symbol, decimals
    token1: tuple[str, str, int]


# Uniswap V2 pairs on Ethereum with WETH on one side, and the other token's price in ETH, roughly.
UNISWAP_PAIRS: tuple[tuple[Pair, float], ...] = (
    (Pair("0xb4e16d0168e52d35cacd2c6185b44281ec28c9dc",
          ("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "USDC", 6), (WETH, "WETH", 18)), 1 / 3000),
    (Pair("0x0d4a11d5eeaac28ec3f61d100daf4d40471f1852",
          (WETH, "WETH", 18), ("0xdac17f958d2ee523a2206206994597c13d831ec7", "USDT", 6)), 1 / 3000),
    (Pair("0xa478c2975ab1ea89e8196811f51a7b7ade33eb11",
          ("0x6b175474e89094c44da98b954eedeac495271d0f", "DAI", 18), (WETH, "WETH", 18)), 1 / 3000),
)


# -- ABI entries, as solc emits them ------------------------------------------------------------------


def _param(name: str, type_: str, indexed: bool | None = None, internal: str | None = None,
           components: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"internalType": internal or type_, "name": name, "type": type_}
    if components is not None:
        entry["components"] = components
    if indexed is not None:
        entry["indexed"] = indexed
    return entry


def _event(name: str, *inputs: dict[str, Any]) -> dict[str, Any]:
    return {"anonymous": False, "inputs": list(inputs), "name": name, "type": "event"}


def _function(name: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
              mutability: str = "nonpayable") -> dict[str, Any]:
    return {"inputs": inputs, "name": name, "outputs": outputs, "stateMutability": mutability, "type": "function"}


ERC20_TRANSFER = _event("Transfer", _param("from", "address", True), _param("to", "address", True),
                        _param("value", "uint256", False))
ERC20_APPROVAL = _event("Approval", _param("owner", "address", True), _param("spender", "address", True),
                        _param("value", "uint256", False))
ERC20_TRANSFER_FN = _function("transfer", [_param("to", "address"), _param("value", "uint256")],
                              [_param("", "bool")])
ERC20_APPROVE_FN = _function("approve", [_param("spender", "address"), _param("value", "uint256")],
                             [_param("", "bool")])
ERC20_ABI = [ERC20_TRANSFER, ERC20_APPROVAL, ERC20_TRANSFER_FN, ERC20_APPROVE_FN]

ERC721_TRANSFER = _event("Transfer", _param("from", "address", True), _param("to", "address", True),
                         _param("tokenId", "uint256", True))
ERC721_MINT_FN = _function("mint", [_param("to", "address"), _param("tokenId", "uint256")], [])

ERC1155_TRANSFER_SINGLE = _event(
    "TransferSingle", _param("operator", "address", True), _param("from", "address", True),
    _param("to", "address", True), _param("id", "uint256", False), _param("value", "uint256", False))
ERC1155_TRANSFER_BATCH = _event(
    "TransferBatch", _param("operator", "address", True), _param("from", "address", True),
    _param("to", "address", True), _param("ids", "uint256[]", False), _param("values", "uint256[]", False))
ERC1155_SAFE_TRANSFER_FN = _function("safeTransferFrom", [
    _param("from", "address"), _param("to", "address"), _param("id", "uint256"), _param("amount", "uint256"),
    _param("data", "bytes")], [])
ERC1155_SAFE_BATCH_TRANSFER_FN = _function("safeBatchTransferFrom", [
    _param("from", "address"), _param("to", "address"), _param("ids", "uint256[]"),
    _param("amounts", "uint256[]"), _param("data", "bytes")], [])
ERC1155_ABI = [ERC1155_TRANSFER_SINGLE, ERC1155_TRANSFER_BATCH, ERC1155_SAFE_TRANSFER_FN,
               ERC1155_SAFE_BATCH_TRANSFER_FN]

UNISWAP_V2_SWAP = _event(
    "Swap", _param("sender", "address", True), _param("amount0In", "uint256", False),
    _param("amount1In", "uint256", False), _param("amount0Out", "uint256", False),
    _param("amount1Out", "uint256", False), _param("to", "address", True))
SWAP_EXACT_ETH_FOR_TOKENS_FN = _function("swapExactETHForTokens", [
    _param("amountOutMin", "uint256"), _param("path", "address[]"), _param("to", "address"),
    _param("deadline", "uint256")], [_param("amounts", "uint256[]")], "payable")
SWAP_EXACT_TOKENS_FOR_ETH_FN = _function("swapExactTokensForETH", [
    _param("amountIn", "uint256"), _param("amountOutMin", "uint256"), _param("path", "address[]"),
    _param("to", "address"), _param("deadline", "uint256")], [_param("amounts", "uint256[]")])
SWAP_ABI = [UNISWAP_V2_SWAP, SWAP_EXACT_ETH_FOR_TOKENS_FN, SWAP_EXACT_TOKENS_FOR_ETH_FN]

_SPENT_ITEM = [_param("itemType", "uint8", internal="enum ItemType"), _param("token", "address"),
               _param("identifier", "uint256"), _param("amount", "uint256")]
_RECEIVED_ITEM = [*_SPENT_ITEM, _param("recipient", "address", internal="address payable")]
SEAPORT_ORDER_FULFILLED = _event(
    "OrderFulfilled", _param("orderHash", "bytes32", False), _param("offerer", "address", True),
    _param("zone", "address", True), _param("recipient", "address", False),
    _param("offer", "tuple[]", False, "struct SpentItem[]", _SPENT_ITEM),
    _param("consideration", "tuple[]", False, "struct ReceivedItem[]", _RECEIVED_ITEM))
SEAPORT_FULFILL_BASIC_ORDER_FN = _function("fulfillBasicOrder", [_param(
    "parameters", "tuple", internal="struct BasicOrderParameters", components=[
        _param("considerationToken", "address"), _param("considerationIdentifier", "uint256"),
        _param("considerationAmount", "uint256"), _param("offerer", "address", internal="address payable"),
        _param("zone", "address"), _param("offerToken", "address"), _param("offerIdentifier", "uint256"),
        _param("offerAmount", "uint256"), _param("basicOrderType", "uint8", internal="enum BasicOrderType"),
        _param("startTime", "uint256"), _param("endTime", "uint256"), _param("zoneHash", "bytes32"),
        _param("salt", "uint256"), _param("offererConduitKey", "bytes32"),
        _param("fulfillerConduitKey", "bytes32"), _param("totalOriginalAdditionalRecipients", "uint256"),
        _param("additionalRecipients", "tuple[]", internal="struct AdditionalRecipient[]", components=[
            _param("amount", "uint256"), _param("recipient", "address", internal="address payable")]),
        _param("signature", "bytes")])], [_param("fulfilled", "bool")], "payable")
SALE_ABI = [SEAPORT_ORDER_FULFILLED, ERC721_TRANSFER, ERC1155_TRANSFER_SINGLE, SEAPORT_FULFILL_BASIC_ORDER_FN]

# Seaport's item types and the basic order types used here (ETH paid for an ERC-721 / ERC-1155 item).
NATIVE, ERC721_ITEM, ERC1155_ITEM = 0, 2, 3
ETH_TO_ERC721_FULL_OPEN, ETH_TO_ERC1155_FULL_OPEN = 0, 4
# OpenSea's conduit key: the items move through its conduit.
OPENSEA_CONDUIT_KEY = "0x0000007b02230091a7ed01230072f7006a004d60a8d4e71d599b8104250f0000"


def _types(entry: dict[str, Any], *, indexed: bool | None = None) -> list[str]:
    return [collapse_if_tuple(p) for p in entry["inputs"] if indexed is None or bool(p.get("indexed")) == indexed]


def signature(entry: dict[str, Any]) -> str:
    return f"{entry['name']}({','.join(_types(entry))})"


def topic0(entry: dict[str, Any]) -> str:
    return "0x" + event_signature_to_log_topic(signature(entry)).hex()


def call(entry: dict[str, Any], *args: Any) -> str:
    """A transaction input: the function's selector and its arguments, ABI-encoded."""
    return "0x" + (function_signature_to_4byte_selector(signature(entry)) + encode(_types(entry), args)).hex()


def log(entry: dict[str, Any], address: str, tx_hash: str, log_index: int, **values: Any) -> dict[str, Any]:
    """A log of the event with these argument values: indexed ones as topics, the rest as data."""
    topics: list[str | None] = [topic0(entry)]
    data_types, data_values = [], []
    for p in entry["inputs"]:
        if p.get("indexed"):
            topics.append("0x" + encode([collapse_if_tuple(p)], [values[p["name"]]]).hex())
        else:
            data_types.append(collapse_if_tuple(p))
            data_values.append(values[p["name"]])
    topics += [None] * (4 - len(topics))
    return {
        "logIndex": str(log_index),
        "transactionHash": tx_hash,
        "address": address,
        "data": "0x" + encode(data_types, data_values).hex(),
        "topic0": topics[0],
        "topic1": topics[1],
        "topic2": topics[2],
        "topic3": topics[3],
    }


def with_decimals(amount: int, decimals: int) -> str:
    """`valueWithDecimals`: the exact amount in the token's units, without exponent or trailing zeros."""
    text = format(Decimal(amount).scaleb(-decimals), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


# -- the payload -------------------------------------------------------------------------------------


def _tx(r: random.Random, index: int, sender: str, to: str, value: int, input_: str) -> dict[str, Any]:
    gas = r.randint(21000, 350000)
    used = r.randint(21000, gas)
    return {
        "hash": entropy.tx_hash(r),
        "gas": str(gas),
        "gasPrice": str(r.randint(8, 80) * 10**9 + r.randint(0, 10**9)),
        "nonce": str(r.randint(0, 4000)),
        "input": input_,
        "transactionIndex": str(index),
        "fromAddress": sender,
        "toAddress": to,
        "value": str(value),
        "type": "2",
        "v": str(r.randint(0, 1)),
        "r": str(int(entropy.hex_bytes(r, 32), 16)),
        "s": str(int(entropy.hex_bytes(r, 32), 16)),
        "receiptCumulativeGasUsed": str(used + r.randint(0, 9_000_000)),
        "receiptGasUsed": str(used),
        "receiptContractAddress": None,
        "receiptRoot": None,
        "receiptStatus": "1",
    }


@dataclass
class _Block:
    """What one payload collects while its transactions are drawn."""

    r: random.Random
    tx_index: int
    log_index: int
    logs: list[dict[str, Any]]
    txs: list[dict[str, Any]]
    internal: list[dict[str, Any]]
    erc20: list[dict[str, Any]]
    approvals: list[dict[str, Any]]
    nfts: list[dict[str, Any]]

    def tx(self, sender: str, to: str, value: int, input_: str) -> dict[str, Any]:
        tx = _tx(self.r, self.tx_index, sender, to, value, input_)
        self.txs.append(tx)
        self.tx_index += self.r.randint(1, 9)
        return tx

    def log(self, entry: dict[str, Any], address: str, tx: dict[str, Any], **values: Any) -> dict[str, Any]:
        item = log(entry, address, tx["hash"], self.log_index, **values)
        self.logs.append(item)
        self.log_index += 1
        return item

    def next_tx(self) -> None:
        self.log_index += self.r.randint(0, 11)


# The ABI a stream of each kind was created with, and which its payloads carry (native streams have none).
ABIS: dict[str, list[dict[str, Any]]] = {
    "erc20": ERC20_ABI,
    "sale": SALE_ABI,
    "erc1155": ERC1155_ABI,
    "mint": [ERC721_TRANSFER, ERC721_MINT_FN],
    "swap": SWAP_ABI,
}


def watched_wallet(seed: int, stream_id: str) -> str:
    """The wallet a native stream (native transfers, deposits) watches."""
    return entropy.address(entropy.rng(seed, "watched", stream_id))


def build_payload(seed: int, event: Any) -> dict[str, Any]:
    """An EVM webhook body for one block of one stream (`event` is the history's BlockEvent)."""
    r = entropy.rng(seed, "payload", event.key)
    stream = event.stream
    chain = stream.chain
    block = _Block(r, r.randint(0, 40), r.randint(0, 200), [], [], [], [], [], [])
    # A block in which nothing matched (re-sent on request) has nothing to carry.
    n = 1 + min(int(r.expovariate(0.7)), 6) if getattr(event, "matched", True) else 0
    abi = ABIS.get(stream.kind, [])
    if n == 0:
        pass
    elif stream.kind == "erc20":
        tokens = [t for t in catalog.erc20_tokens_on(chain.hex_id) if t.symbol == stream.token]
        for _ in range(n):
            _erc20(block, r.choice(tokens or list(catalog.ERC20_TOKENS[:1])))
    elif stream.kind == "sale":
        contracts = catalog.nft_contracts_on(chain.hex_id) or list(catalog.NFT_CONTRACTS[:1])
        for _ in range(n):
            _sale(block, r.choice(contracts), event.ts)
    elif stream.kind == "erc1155":
        contracts = [c for c in catalog.nft_contracts_on(chain.hex_id) if c.contract_type == "ERC1155"]
        for _ in range(n):
            _erc1155(block, r.choice(contracts))
    elif stream.kind == "mint":
        contracts = [c for c in catalog.nft_contracts_on(chain.hex_id) if c.contract_type == "ERC721"]
        for _ in range(n):
            _mint(block, r.choice(contracts))
    elif stream.kind == "swap":
        for _ in range(n):
            _swap(block, event.ts)
    else:
        watched = watched_wallet(seed, stream.id)
        for _ in range(n):
            _native(block, watched, incoming_only=stream.kind == "deposits")
    block_hash = entropy.tx_hash(entropy.rng(seed, "block", chain.hex_id, event.number))
    return {
        "block": {"number": str(event.number), "hash": block_hash, "timestamp": str(int(event.ts))},
        "chainId": chain.hex_id,
        "logs": block.logs,
        "txs": block.txs,
        "txsInternal": block.internal,
        "abi": abi,
        "retries": 0,
        "confirmed": False,
        "tag": stream.tag,
        "streamId": stream.id,
        "erc20Transfers": block.erc20,
        "erc20Approvals": block.approvals,
        "nftTransfers": block.nfts,
        "nftApprovals": {"ERC721": [], "ERC1155": []},
        "nftTokenApprovals": [],
        "nativeBalances": [],
    }


def _erc20(block: _Block, token: catalog.Erc20Token) -> None:
    r = block.r
    sender, other = entropy.address(r), entropy.address(r)
    amount = r.randint(1, 250_000) * 10**token.decimals // r.choice((1, 10, 100))
    token_fields = {
        "tokenName": token.name, "tokenSymbol": token.symbol, "tokenDecimals": str(token.decimals),
        "valueWithDecimals": with_decimals(amount, token.decimals), "possibleSpam": False,
    }
    if r.random() < 0.15:
        tx = block.tx(sender, token.address, 0, call(ERC20_APPROVE_FN, other, amount))
        item = block.log(ERC20_APPROVAL, token.address, tx, owner=sender, spender=other, value=amount)
        block.approvals.append({
            "transactionHash": tx["hash"], "logIndex": item["logIndex"], "contract": token.address,
            "owner": sender, "spender": other, "value": str(amount), **token_fields,
        })
    else:
        tx = block.tx(sender, token.address, 0, call(ERC20_TRANSFER_FN, other, amount))
        triggers = [{"name": "fromBalance", "value": str(amount * r.randint(1, 40))}]
        item = block.log(ERC20_TRANSFER, token.address, tx, **{"from": sender, "to": other, "value": amount})
        item["triggers"] = triggers
        block.erc20.append({
            "transactionHash": tx["hash"], "logIndex": item["logIndex"], "contract": token.address,
            "triggers": triggers, "from": sender, "to": other, "value": str(amount), **token_fields,
        })
    block.next_tx()


def _nft_item(contract: catalog.NftContract, tx: dict[str, Any], log_item: dict[str, Any], sender: str, to: str,
              token_id: int, amount: int, operator: str | None) -> dict[str, Any]:
    return {
        "from": sender, "to": to, "tokenId": str(token_id), "amount": str(amount),
        "transactionHash": tx["hash"], "logIndex": log_item["logIndex"], "contract": contract.address,
        "tokenName": contract.name, "tokenSymbol": contract.symbol, "tokenContractType": contract.contract_type,
        "operator": operator, "possibleSpam": False, "triggers": [],
    }


def _sale(block: _Block, contract: catalog.NftContract, ts: float) -> None:
    """A Seaport basic order: the buyer pays ETH, the seller's item moves to the buyer, fees to OpenSea."""
    r = block.r
    seller, buyer = entropy.address(r), entropy.address(r)
    price = r.randint(1, 400) * 10**16
    fee = price // 40  # 2.5 %
    erc1155 = contract.contract_type == "ERC1155"
    token_id = r.randint(0, 9999)
    amount = r.randint(1, 5) if erc1155 else 1
    salt = r.getrandbits(256)
    parameters = (
        ZERO_ADDRESS, 0, price - fee, seller, ZERO_ADDRESS, contract.address, token_id, amount,
        ETH_TO_ERC1155_FULL_OPEN if erc1155 else ETH_TO_ERC721_FULL_OPEN, int(ts) - r.randint(3600, 864000),
        int(ts) + r.randint(86400, 2592000), b"\x00" * 32, salt, bytes.fromhex(OPENSEA_CONDUIT_KEY[2:]),
        b"\x00" * 32, 1, [(fee, OPENSEA_FEES)], r.randbytes(65),
    )
    tx = block.tx(buyer, SEAPORT, price, call(SEAPORT_FULFILL_BASIC_ORDER_FN, parameters))
    if erc1155:
        moved = block.log(ERC1155_TRANSFER_SINGLE, contract.address, tx, operator=OPENSEA_CONDUIT,
                          **{"from": seller, "to": buyer, "id": token_id, "value": amount})
    else:
        moved = block.log(ERC721_TRANSFER, contract.address, tx, **{"from": seller, "to": buyer, "tokenId": token_id})
    block.log(
        SEAPORT_ORDER_FULFILLED, SEAPORT, tx, orderHash=r.randbytes(32), offerer=seller, zone=ZERO_ADDRESS,
        recipient=buyer, offer=[(ERC1155_ITEM if erc1155 else ERC721_ITEM, contract.address, token_id, amount)],
        consideration=[(NATIVE, ZERO_ADDRESS, 0, price - fee, seller), (NATIVE, ZERO_ADDRESS, 0, fee, OPENSEA_FEES)],
    )
    block.nfts.append(_nft_item(contract, tx, moved, seller, buyer, token_id, amount,
                                OPENSEA_CONDUIT if erc1155 else None))
    block.next_tx()


def _erc1155(block: _Block, contract: catalog.NftContract) -> None:
    """A transfer of shared-storefront items: ids carry their creator in the top 160 bits."""
    r = block.r
    sender, to = entropy.address(r), entropy.address(r)
    creator = int(entropy.address(r), 16)
    count = r.choice((1, 1, 1, 2, 3, 4))
    ids = [(creator << 96) | (r.randint(1, 9999) << 40) | r.randint(1, 500) for _ in range(count)]
    amounts = [r.randint(1, 20) for _ in ids]
    if count == 1:
        tx = block.tx(sender, contract.address, 0, call(ERC1155_SAFE_TRANSFER_FN, sender, to, ids[0], amounts[0], b""))
        moved = block.log(ERC1155_TRANSFER_SINGLE, contract.address, tx, operator=sender,
                          **{"from": sender, "to": to, "id": ids[0], "value": amounts[0]})
    else:
        tx = block.tx(sender, contract.address, 0,
                      call(ERC1155_SAFE_BATCH_TRANSFER_FN, sender, to, ids, amounts, b""))
        moved = block.log(ERC1155_TRANSFER_BATCH, contract.address, tx, operator=sender,
                          **{"from": sender, "to": to, "ids": ids, "values": amounts})
    for token_id, amount in zip(ids, amounts, strict=True):
        block.nfts.append(_nft_item(contract, tx, moved, sender, to, token_id, amount, sender))
    block.next_tx()


def _mint(block: _Block, contract: catalog.NftContract) -> None:
    r = block.r
    to = entropy.address(r)
    token_id = r.randint(0, 11_999)
    tx = block.tx(to, contract.address, r.randint(0, 3) * 10**16, call(ERC721_MINT_FN, to, token_id))
    moved = block.log(ERC721_TRANSFER, contract.address, tx, **{"from": ZERO_ADDRESS, "to": to, "tokenId": token_id})
    block.nfts.append(_nft_item(contract, tx, moved, ZERO_ADDRESS, to, token_id, 1, None))
    block.next_tx()


def _swap(block: _Block, ts: float) -> None:
    """A router swap on one pair: ETH in for the token out, or the token in for ETH out."""
    r = block.r
    pair, token_in_eth = r.choice(UNISWAP_PAIRS)
    weth_is_0 = pair.token0[0] == WETH
    address, _symbol, decimals = pair.token1 if weth_is_0 else pair.token0
    trader = entropy.address(r)
    eth = r.randint(10**15, 5 * 10**19)
    tokens = int(Decimal(eth).scaleb(decimals - 18) / Decimal(token_in_eth) * Decimal(r.uniform(0.98, 1.02)))
    deadline = int(ts) + 1200
    if r.random() < 0.5:
        input_ = call(SWAP_EXACT_ETH_FOR_TOKENS_FN, tokens * 99 // 100, [WETH, address], trader, deadline)
        tx = block.tx(trader, SWAP_ROUTER, eth, input_)
        amounts = {"amount0In": eth, "amount1In": 0, "amount0Out": 0, "amount1Out": tokens} if weth_is_0 else \
            {"amount0In": 0, "amount1In": eth, "amount0Out": tokens, "amount1Out": 0}
        recipient = trader
    else:
        input_ = call(SWAP_EXACT_TOKENS_FOR_ETH_FN, tokens, eth * 99 // 100, [address, WETH], trader, deadline)
        tx = block.tx(trader, SWAP_ROUTER, 0, input_)
        amounts = {"amount0In": 0, "amount1In": tokens, "amount0Out": eth, "amount1Out": 0} if weth_is_0 else \
            {"amount0In": tokens, "amount1In": 0, "amount0Out": 0, "amount1Out": eth}
        recipient = SWAP_ROUTER  # the router unwraps the WETH and sends the ETH on
    item = block.log(UNISWAP_V2_SWAP, pair.address, tx, sender=SWAP_ROUTER, to=recipient, **amounts)
    item["triggers"] = [{"name": "amountEth", "value": with_decimals(eth, 18)}]
    block.next_tx()


def _native(block: _Block, watched: str, *, incoming_only: bool) -> None:
    r = block.r
    incoming = incoming_only or r.random() < 0.6
    other = entropy.address(r)
    value = r.randint(10**15, 3 * 10**19)
    tx = block.tx(other if incoming else watched, watched if incoming else other, value, "0x")
    tx["triggers"] = [{"name": "direction", "value": "in" if incoming else "out"}]
    if r.random() < 0.3:
        block.internal.append({
            "from": entropy.address(r), "to": watched, "value": str(r.randint(10**14, 10**18)),
            "transactionHash": tx["hash"], "gas": str(r.randint(2300, 60000)),
        })
