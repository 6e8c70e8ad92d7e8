"""The delivery detail page's reading of a payload: tables of logs, transactions and transfers with links,
the logs and inputs decoded with the payload's ABI, the ABI, and the raw JSON as a collapsible tree.

Payloads are untrusted and may be megabytes: every string is escaped, long values are clipped, tables
stop at a row limit and the tree at a node budget, each with a way to see everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from dashboard.deliveries.decoding import (
    TOKEN_AMOUNT_CALLS,
    TOKEN_AMOUNT_EVENTS,
    ContractAbi,
    Decoded,
    Token,
    Value,
    decode_input,
    decode_log,
    read_abi,
    token_amount,
    tokens,
)
from dashboard.text import clip, visible
from dashboard.web.explorers import explorer_url, owners_lookup_url

HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")
ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")

TABLE_ROWS = 100
CELL_CHARS = 66
TREE_NODES = 4000
TREE_STRING_CHARS = 400
# Above this many bytes of JSON the page starts collapsed and clipped.
LARGE_PAYLOAD = 256 * 1024


@dataclass
class Cell:
    text: str = ""
    kind: str = "text"  # text | tx | address | block | hash | null | list
    clipped: int = 0
    explorer: str | None = None
    search: str | None = None
    owners: str | None = None
    title: str = ""

    @property
    def long(self) -> bool:
        return len(self.text) > 24


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    total: int = 0

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)


# (payload key, title, columns, columns holding NFT contracts)
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("logs", "Logs", ("logIndex", "transactionHash", "address", "topic0", "topic1", "topic2", "topic3", "data",
                      "triggers")),
    ("txs", "Transactions", ("hash", "fromAddress", "toAddress", "value", "gas", "gasPrice", "nonce",
                             "transactionIndex", "receiptStatus", "receiptGasUsed", "receiptContractAddress",
                             "input", "triggers")),
    ("txsInternal", "Internal transactions", ("transactionHash", "from", "to", "value", "gas")),
    ("erc20Transfers", "Token transfers", ("transactionHash", "logIndex", "contract", "tokenSymbol", "from", "to",
                                           "valueWithDecimals", "value", "possibleSpam", "triggers")),
    ("erc20Approvals", "Token approvals", ("transactionHash", "logIndex", "contract", "tokenSymbol", "owner",
                                           "spender", "valueWithDecimals", "value", "triggers")),
    ("nftTransfers", "NFT transfers", ("transactionHash", "logIndex", "contract", "tokenName", "tokenContractType",
                                       "tokenId", "amount", "from", "to", "operator", "possibleSpam", "triggers")),
    ("nftApprovals", "NFT approvals", ("standard", "transactionHash", "logIndex", "contract", "tokenContractType",
                                       "tokenId", "account", "operator", "approvedAll", "triggers")),
    ("nftTokenApprovals", "NFT token approvals", ("transactionHash", "logIndex", "contract", "tokenId", "owner",
                                                  "approved", "triggers")),
    ("nativeBalances", "Native balances", ("address", "balance", "balanceWithDecimals")),
)
NFT_SECTIONS = {"nftTransfers", "nftApprovals", "nftTokenApprovals"}
TX_COLUMNS = {"transactionHash", "hash"}


def search_url(value: str) -> str:
    return f"{reverse('web:search')}?{urlencode({'q': value})}"


def cell(value: Any, column: str, chain_id: str | None, *, nft: bool = False, full: bool = False) -> Cell:
    if value is None:
        return Cell("null", kind="null")
    if column == "triggers" and isinstance(value, list):
        parts = [
            f"{visible(t.get('name'))}={visible(t.get('value'))}" for t in value if isinstance(t, dict)
        ]
        text = ", ".join(parts)
        shown, cut = clip(text, 10_000 if full else CELL_CHARS * 2)
        return Cell(shown, kind="list", clipped=cut, title=text[:2000])
    if isinstance(value, (dict, list)):
        text = f"{len(value)} item(s)" if isinstance(value, list) else "{…}"
        return Cell(text, kind="list")
    text = visible(value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else value)
    if isinstance(value, str) and HASH.match(value):
        kind = "tx" if column in TX_COLUMNS else "hash"
        return Cell(
            value.lower(),
            kind=kind,
            explorer=explorer_url(chain_id, "tx", value) if kind == "tx" else None,
            search=search_url(value.lower()),
        )
    if isinstance(value, str) and ADDRESS.match(value):
        return Cell(
            value.lower(),
            kind="address",
            explorer=explorer_url(chain_id, "address", value),
            search=search_url(value.lower()),
            owners=owners_lookup_url(value.lower(), chain_id) if nft and column == "contract" else None,
        )
    shown, cut = clip(text, 100_000 if full else CELL_CHARS)
    return Cell(shown, clipped=cut, title=text[:2000] if cut else "")


def _rows_of(key: str, value: Any) -> list[dict[str, Any]]:
    if key == "nftApprovals" and isinstance(value, dict):
        rows = []
        for standard, items in value.items():
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict):
                    rows.append({"standard": standard, **item})
        return rows
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def tables(payload: dict[str, Any], chain_id: str | None, *, full: bool = False) -> list[Table]:
    """The sections present in the payload, as tables with at most TABLE_ROWS rows unless `full`."""
    result = []
    for key, title, columns in SECTIONS:
        rows = _rows_of(key, payload.get(key))
        if not rows:
            continue
        present = [c for c in columns if any(c in row for row in rows[:TABLE_ROWS])]
        table = Table(key, title, present, total=len(rows))
        limit = len(rows) if full else TABLE_ROWS
        for row in rows[:limit]:
            table.rows.append([cell(row.get(c), c, chain_id, nft=key in NFT_SECTIONS, full=full) for c in present])
        result.append(table)
    return result


@dataclass
class AbiEntry:
    type: str
    name: str
    signature: str
    selector: str = ""  # an event's topic0 or a function's selector, when the entry is usable
    problem: str = ""  # why the entry is not used for decoding


def abi_entries(payload: dict[str, Any], contract_abi: ContractAbi | None = None) -> list[AbiEntry]:
    entries = []
    abi = payload.get("abi")
    contract_abi = contract_abi or read_abi(abi)
    problems = {p.position: p.reason for p in contract_abi.problems}
    for position, item in enumerate(abi if isinstance(abi, list) else []):
        if not isinstance(item, dict):
            entries.append(AbiEntry("?", "", visible(clip(str(item), 200)[0]), problem=problems.get(position, "")))
            continue
        raw_inputs = item.get("inputs")
        inputs: list[Any] = raw_inputs if isinstance(raw_inputs, list) else []
        params = ", ".join(
            visible(
                f"{i.get('type', '?')}{' indexed' if i.get('indexed') else ''} {i.get('name') or ''}".strip()
            )
            for i in inputs
            if isinstance(i, dict)
        )
        name = visible(item.get("name") or "")
        read = contract_abi.items.get(position)
        entries.append(AbiEntry(
            visible(item.get("type") or "?"), name, f"{name}({params})",
            selector="0x" + read.selector.hex() if read else "",
            problem=problems.get(position, ""),
        ))
    return entries


# -- logs and inputs decoded with the payload's ABI ----------------------------------------------------

# Values rendered for one decoded log or call before the rest is left out (nested arrays multiply).
DECODED_VALUES = 400
DECODED_STRING_CHARS = 200


@dataclass
class DecodedRow:
    """One log or transaction: its event or call rendered, or why it stays raw."""

    position: str
    tx: str  # a transaction hash, or empty when the payload's is not one
    contract: str  # an address, or empty
    html: SafeString | None  # the decoded event or call
    problem: str = ""
    raw: str = ""  # topic0 or selector, for a row that stays raw


@dataclass
class DecodedSection:
    key: str
    title: str
    rows: list[DecodedRow]
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)

    @property
    def undecoded(self) -> int:
        return sum(1 for row in self.rows if row.html is None)


class _ValueWriter:
    """One decoded event or call as HTML: `Name(arg type=value, ...)`, every text escaped by format_html."""

    def __init__(self, chain_id: str | None, token: Token | None) -> None:
        self.chain_id = chain_id
        self.token = token
        self.budget = DECODED_VALUES

    def call(self, decoded: Decoded) -> SafeString:
        assert decoded.item is not None
        args = format_html_join(", ", "{}", ((self.arg(a, top=True),) for a in decoded.args))
        return format_html(
            '<span class="ev"><strong class="ev-name" title="{}">{}</strong>({})</span>',
            decoded.item.signature, decoded.item.name, args,
        )

    def arg(self, value: Value, *, top: bool = False) -> SafeString:
        name, _ = clip(visible(value.name), 60)
        # A tuple's canonical type repeats all its fields; the label says tuple (as the ABI does), the
        # title the whole type.
        shown = "tuple" + value.type[value.type.rindex(")") + 1:] if value.type.startswith("(") else value.type
        label = format_html(
            '<span class="an">{}</span> <span class="at" title="{}">{}{}</span>=',
            name, value.type, shown, " indexed" if value.indexed else "",
        ) if name else format_html('<span class="at" title="{}">{}</span> ', value.type, shown)
        return format_html('<span class="arg">{}{}</span>', label, self.value(value, amount=top))

    def value(self, value: Value, *, amount: bool = False) -> SafeString:
        self.budget -= 1
        if self.budget < 0:
            return mark_safe('<span class="faint">…</span>')
        if value.kind == "address":
            explorer = explorer_url(self.chain_id, "address", value.value)
            ext = format_html(
                '<a class="ext" href="{}" target="_blank" rel="noopener noreferrer" title="Open in the block explorer">↗</a>',
                explorer,
            ) if explorer else ""
            return format_html(
                '<span class="hashlink"><a href="{}" title="{} — search our deliveries">{}</a>{}</span>',
                search_url(value.value), value.value, value.value[:8] + "…" + value.value[-4:], ext,
            )
        if value.kind == "int":
            if amount and self.token is not None:
                return format_html(
                    '<span class="amount" title="{} ({} decimals)">{} {}</span>',
                    value.value, self.token.decimals, token_amount(value.value, self.token.decimals),
                    visible(self.token.symbol),
                )
            return format_html('<span class="num">{}</span>', value.value)
        if value.kind == "bool":
            return format_html('<span class="jb">{}</span>', "true" if value.value else "false")
        if value.kind == "string":
            text, cut = clip(visible(value.value), DECODED_STRING_CHARS)
            return format_html('<span class="js">"{}"</span>{}', text, f"… +{cut} chars" if cut else "")
        if value.kind == "hash":
            return format_html(
                '<span class="faint" title="{} — an indexed {} keeps only its keccak hash in the log">hash {}</span>',
                value.value, value.type, value.value[:10] + "…" + value.value[-4:],
            )
        if value.kind in ("tuple", "array"):
            inner = format_html_join(", ", "{}", ((
                self.arg(item) if value.kind == "tuple" else self.value(item),) for item in value.items))
            more = format_html(', <span class="faint">… {} more</span>', value.more) if value.more else ""
            brackets = ("(", ")") if value.kind == "tuple" else ("[", "]")
            return format_html("{}{}{}{}", brackets[0], inner, more, brackets[1])
        text, cut = clip(str(value.value), CELL_CHARS)
        return format_html('<span title="{}">{}{}</span>', str(value.value)[:2000], text, "…" if cut else "")


def decoded_sections(payload: dict[str, Any], chain_id: str | None, *, full: bool = False) -> list[DecodedSection]:
    """The payload's logs decoded as events and its transaction inputs as calls, with the payload's own
    ABI; empty when the payload has no ABI. Rows that do not decode keep their raw topic0 or selector."""
    contract_abi = read_abi(payload.get("abi"))
    if not (contract_abi.events or contract_abi.functions or contract_abi.anonymous or contract_abi.problems):
        return []
    token_of = tokens(payload)
    sections = []
    logs = _rows_of("logs", payload.get("logs"))
    if logs:
        rows = []
        for log in logs if full else logs[:TABLE_ROWS]:
            decoded = decode_log(contract_abi, log)
            address = log.get("address")
            token = None
            if decoded.item is not None and decoded.item.signature in TOKEN_AMOUNT_EVENTS and isinstance(address, str):
                token = token_of.get(address.lower())
            rows.append(_decoded_row(log.get("logIndex"), log.get("transactionHash"), address, decoded, chain_id,
                                     token, log.get("topic0")))
        sections.append(DecodedSection("decoded-logs", "Decoded events", rows, len(logs)))
    txs = [tx for tx in _rows_of("txs", payload.get("txs")) if tx.get("input") not in (None, "", "0x")]
    if txs and contract_abi.functions:
        rows = []
        for tx in txs if full else txs[:TABLE_ROWS]:
            call = decode_input(contract_abi, tx.get("input"))
            raw_input = tx.get("input")
            selector = raw_input[:10] if isinstance(raw_input, str) else ""
            to = tx.get("toAddress")
            token = None
            if call is not None and call.item is not None and call.item.signature in TOKEN_AMOUNT_CALLS:
                token = token_of.get(to.lower()) if isinstance(to, str) else None
            rows.append(_decoded_row(tx.get("transactionIndex"), tx.get("hash"), to,
                                     call or Decoded(problem="no input"), chain_id, token, selector))
        sections.append(DecodedSection("decoded-calls", "Decoded calls", rows, len(txs)))
    return sections


def _decoded_row(
    position: Any, tx: Any, contract: Any, decoded: Decoded, chain_id: str | None, token: Token | None, raw: Any
) -> DecodedRow:
    # Links come from _hash.html in the template; a value that is not a hash or an address shows as "—".
    html = _ValueWriter(chain_id, token).call(decoded) if decoded.item is not None else None
    raw_text, _ = clip(visible(raw), CELL_CHARS) if raw is not None else ("", 0)
    return DecodedRow(
        clip(visible(position), 20)[0],
        tx.lower() if isinstance(tx, str) and HASH.match(tx) else "",
        contract.lower() if isinstance(contract, str) and ADDRESS.match(contract) else "",
        html, decoded.problem, raw_text,
    )


class _TreeWriter:
    """Nested <details> for objects and arrays; leaves typed by colour. Built as a string, escaped here."""

    def __init__(self, budget: int, full: bool, string_chars: int) -> None:
        self.budget = budget
        self.full = full
        self.string_chars = string_chars
        self.parts: list[str] = []
        self.cut = False

    def write(self, key: str | None, value: Any, depth: int) -> None:
        if self.budget <= 0:
            self.cut = True
            return
        self.budget -= 1
        label = f'<span class="jk">{escape(visible(key))}</span>: ' if key is not None else ""
        if isinstance(value, dict) or isinstance(value, list):
            is_dict = isinstance(value, dict)
            size = len(value)
            brackets = ("{", "}") if is_dict else ("[", "]")
            summary = f"{brackets[0]}{size} {'key' if is_dict else 'item'}{'' if size == 1 else 's'}{brackets[1]}"
            if size == 0:
                self.parts.append(f'<div class="jl">{label}<span class="jn">{brackets[0]}{brackets[1]}</span></div>')
                return
            is_open = " open" if depth < 2 else ""
            self.parts.append(f'<details class="jt"{is_open}><summary>{label}<span class="jn">{summary}</span></summary>')
            items: Iterable[tuple[Any, Any]] = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if self.budget <= 0:
                    self.cut = True
                    break
                self.write(str(k), v, depth + 1)
            self.parts.append("</details>")
            return
        if value is None:
            rendered = '<span class="jnull">null</span>'
        elif isinstance(value, bool):
            rendered = f'<span class="jb">{"true" if value else "false"}</span>'
        elif isinstance(value, (int, float)):
            rendered = f'<span class="jnum">{escape(str(value))}</span>'
        else:
            text = visible(value)
            shown, cut = clip(text, len(text) if self.full else self.string_chars)
            more = f' <span class="muted">… {cut:,} more characters</span>' if cut else ""
            rendered = f'<span class="js">"{escape(shown)}"</span>{more}'
        self.parts.append(f'<div class="jl">{label}{rendered}</div>')


def json_tree(payload: Any, *, full: bool = False, large: bool = False) -> tuple[SafeString, bool]:
    """The payload as collapsible HTML and whether the node budget cut it short. A large payload gets a
    smaller budget and shorter strings, so the page stays light; `full` lifts the limits (within reason)."""
    if full:
        budget, chars = TREE_NODES * 25, TREE_STRING_CHARS
    elif large:
        budget, chars = TREE_NODES // 4, TREE_STRING_CHARS // 4
    else:
        budget, chars = TREE_NODES, TREE_STRING_CHARS
    writer = _TreeWriter(budget=budget, full=full, string_chars=chars)
    writer.write(None, payload, 0)
    return mark_safe("".join(writer.parts)), writer.cut  # noqa: S308 - every value above went through escape()
