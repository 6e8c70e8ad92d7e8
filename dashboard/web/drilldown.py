"""The delivery detail page's reading of a payload: tables of logs, transactions and transfers with links,
the ABI, and the raw JSON as a collapsible tree.

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
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from dashboard.web.explorers import explorer_url, owners_lookup_url
from dashboard.web.text import clip, visible

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


def abi_entries(payload: dict[str, Any]) -> list[AbiEntry]:
    entries = []
    abi = payload.get("abi")
    for item in abi if isinstance(abi, list) else []:
        if not isinstance(item, dict):
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
        entries.append(AbiEntry(visible(item.get("type") or "?"), name, f"{name}({params})"))
    return entries


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
