"""Realistic delivery rows in bulk, written by one INSERT … SELECT over generate_series.

Used to try the admin and the dashboard on a table of realistic size and to check query plans
(tests run EXPLAIN on 100 k rows). The hourly rollups, stream rows and error-group counts are then rebuilt
from the rows (`deliveries/rebuild.py`), so the rollup pages read what ingest would have written. The rows
are spread evenly over `days` up to `newest`: `days=90` is a long history, `days=1` a heavy day;
`ends_days_ago` moves the span into the past (a day just past HISTORY_RETENTION_DAYS gives retention a day to
delete), with ids and hashes of its own, so a second span of the same seed lands in the same source and
streams. Rows look like stored ERC-20 stream deliveries: two transfers a delivery, addresses drawn from a
pool so each appears in a few dozen rows (in mixed case in the payload, lower-cased in the keys), the Transfer topic and padded-address topics, a few percent of
failures spread over real-looking error texts, and `search_keys` exactly as the ingest derives them.
With `hostile=True` some error messages, one stream's tag and some payload fields carry markup
(`<script>…`), for checking that every page escapes what upstream sends.

Postgres computes everything (md5 of the seed and the row number stands in for randomness), so the
same seed gives the same rows and 100 k rows take seconds.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from dashboard.deliveries.grouping import error_fingerprint, error_template
from dashboard.deliveries.models import ErrorGroup
from dashboard.deliveries.partitions import ensure_partitions_between
from dashboard.deliveries.rebuild import rebuild_derived
from dashboard.deliveries.write_lock import take_write_lock
from dashboard.sources.models import Source
from dashboard.upstream.chains import find_chain

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
# The ERC-20 Transfer event: the logs decode with it, so the keys hold "event:transfer" as at ingest.
ERC20_TRANSFER_ABI = [
    {"anonymous": False, "name": "Transfer", "type": "event", "inputs": [
        {"indexed": True, "name": "from", "type": "address", "internalType": "address"},
        {"indexed": True, "name": "to", "type": "address", "internalType": "address"},
        {"indexed": False, "name": "value", "type": "uint256", "internalType": "uint256"}]},
]

# tag, chain id, webhook URL, token contract, first block
STREAMS: tuple[tuple[str, str, str, str, int], ...] = (
    ("usdc-transfers", "0x1", "https://api.acme-payments.io/webhooks/moralis",
     "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", 18_908_895),
    ("usdt-transfers", "0x1", "https://hooks.example.com/streams/usdt",
     "0xdac17f958d2ee523a2206206994597c13d831ec7", 18_908_895),
    ("bsc-payments", "0x38", "https://api.acme-payments.io/webhooks/moralis",
     "0x55d398326f99059ff775485246999027b3197955", 34_900_000),
    ("polygon-usdc", "0x89", "https://ingest.treasury-ops.net/moralis/hook",
     "0x2791bca1f2de4661ed88a30c99a7a9449aa84174", 51_766_000),
    ("avax-deposits", "0xa86a", "https://ingest.treasury-ops.net/moralis/hook",
     "0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e", 40_300_000),
    ("arbitrum-usdc", "0xa4b1", "https://swaps.tradebot.example.org/hook?src=moralis",
     "0xaf88d065e77c8cc2239327c5edb3a432268e5831", 166_000_000),
    ("treasury-wallets", "0x89", "https://ingest.treasury-ops.net/moralis/hook",
     "0x2791bca1f2de4661ed88a30c99a7a9449aa84174", 51_766_000),
    ("nft-sales", "0x1", "https://hooks.example.com/streams/nft-sales",
     "0xbc4ca0eda7647a8ab7c2061c2e118a18a936f13d", 18_908_895),
)
ERROR_MESSAGES: tuple[str, ...] = (
    "Request failed with status code 500",
    "Request failed with status code 502",
    "Request failed with status code 404",
    "timeout of 10000ms exceeded",
    "connect ECONNREFUSED 203.0.113.7:443",
    "connect ECONNREFUSED 198.51.100.23:443",
    "getaddrinfo ENOTFOUND hooks.example.com",
    "socket hang up",
    "certificate has expired",
)
HOSTILE_ERROR_MESSAGES: tuple[str, ...] = (
    '<script>alert("error")</script> Request failed with status code 500',
    "<img src=x onerror=alert(1)> upstream said </pre><b>bold</b>",
)
HOSTILE_TAG = '<script>alert("tag")</script>'
HOSTILE_PAYLOAD_TEXT = "</pre><script>alert('payload')</script>"


@dataclass(frozen=True)
class Generated:
    source: Source
    count: int
    stream_ids: tuple[str, ...]
    seconds: float


def address(seed: str, n: int) -> str:
    """The n-th address of the pool, as the SQL below makes it (lower case)."""
    return "0x" + _md5(f"{seed}:addr:{n}")[:32] + _md5(f"{seed}:addr+:{n}")[:8]


def tx_hash(seed: str, i: int, which: int) -> str:
    """Hash of the row's first (which=1) or second (which=2) transaction."""
    a, b = ("a", "b") if which == 1 else ("c", "d")
    return "0x" + _md5(f"{seed}:{a}:{i}") + _md5(f"{seed}:{b}:{i}")


def stream_id(seed: str, n: int) -> str:
    return str(uuid.UUID(_md5(f"{seed}:stream:{n}")))


def delivery_id(seed: str, i: int) -> uuid.UUID:
    return uuid.UUID(_md5(f"{seed}:{i}"))


def row_seed(seed: str, ends_days_ago: float = 0) -> str:
    """What a span's ids and transaction hashes are made from (`delivery_id`, `tx_hash`). A span ending now keeps
    the seed itself; a span moved into the past gets its own, so it never collides with one of the same seed.
    Streams and the address pool come from the seed alone, so both spans share them."""
    return seed if ends_days_ago == 0 else f"{seed}@{ends_days_ago:g}d"


def padded_topic(addr: str) -> str:
    return "0x" + "0" * 24 + addr[2:].lower()


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


# Per row i: h1..h3 are md5 digests of the seed and i; rnd(k) takes 28 bits of one of them.
_INSERT = """
WITH streams AS (
    SELECT * FROM unnest(
        %(stream_ids)s::text[], %(tags)s::text[], %(urls)s::text[], %(chains)s::text[],
        %(contracts)s::text[], %(first_blocks)s::bigint[], %(hostile_streams)s::boolean[], %(finality_ms)s::int[]
    ) WITH ORDINALITY AS s(stream_id, tag, url, chain, contract, first_block, hostile, finality_ms, n)
), errors AS (
    SELECT * FROM unnest(%(messages)s::text[], %(group_ids)s::bigint[])
        WITH ORDINALITY AS e(message, group_id, n)
), base AS MATERIALIZED (
    SELECT i,
           md5(%(row_seed)s || ':' || i) AS h1,
           md5(%(row_seed)s || ':r:' || i) AS h2,
           '0x' || md5(%(row_seed)s || ':a:' || i) || md5(%(row_seed)s || ':b:' || i) AS tx1,
           '0x' || md5(%(row_seed)s || ':c:' || i) || md5(%(row_seed)s || ':d:' || i) AS tx2
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
), rnd AS MATERIALIZED (
    SELECT b.*,
           ('x0' || substr(h2, 1, 7))::bit(32)::int AS r1,
           ('x0' || substr(h2, 8, 7))::bit(32)::int AS r2,
           ('x0' || substr(h2, 15, 7))::bit(32)::int AS r3,
           ('x0' || substr(h2, 22, 7))::bit(32)::int AS r4,
           ('x0' || substr(h1, 1, 7))::bit(32)::int AS r5,
           ('x0' || substr(h1, 8, 7))::bit(32)::int AS r6,
           ('x0' || substr(h1, 15, 7))::bit(32)::int AS r7
      FROM base b
), rows AS MATERIALIZED (
    SELECT r.i, r.tx1, r.tx2, r.r7, r.r3 AS lr1, r.r4 AS lr2,
           h1::uuid AS id,
           %(newest)s::timestamptz - make_interval(secs => r.i * %(step)s::float8) AS date,
           1 + (r.r5 %% %(stream_count)s) AS stream_n,
           r.i %% 2 = 0 AS confirmed,
           CASE WHEN r.r6 %% 1000 < %(failure_permille)s THEN 1 + (r.r6 / 1000) %% %(error_count)s END AS error_n,
           '0x' || substr(md5(%(seed)s || ':addr:' || (r.r1 %% %(pool)s)), 1, 32)
                || substr(md5(%(seed)s || ':addr+:' || (r.r1 %% %(pool)s)), 1, 8) AS from1,
           '0x' || substr(md5(%(seed)s || ':addr:' || (r.r2 %% %(pool)s)), 1, 32)
                || substr(md5(%(seed)s || ':addr+:' || (r.r2 %% %(pool)s)), 1, 8) AS to1,
           '0x' || substr(md5(%(seed)s || ':addr:' || (r.r3 %% %(pool)s)), 1, 32)
                || substr(md5(%(seed)s || ':addr+:' || (r.r3 %% %(pool)s)), 1, 8) AS from2,
           '0x' || substr(md5(%(seed)s || ':addr:' || (r.r4 %% %(pool)s)), 1, 32)
                || substr(md5(%(seed)s || ':addr+:' || (r.r4 %% %(pool)s)), 1, 8) AS to2
      FROM rnd r
), timed AS MATERIALIZED (
    -- The block mined 1-5 s before an unconfirmed delivery, the chain's finality more before a confirmed one;
    -- in about one minute of 89 every delivery is 30 s to 5 min later still. Whole seconds, as payloads give.
    SELECT x.*, to_timestamp(floor(extract(epoch FROM x.date)
               - (1000 + (x.lr2 / 7) %% 4000
                  + CASE WHEN x.confirmed THEN s.finality_ms ELSE 0 END
                  + CASE WHEN (extract(epoch FROM x.date)::bigint / 60) %% 89 = 0
                         THEN 30000 + (x.lr1 / 11) %% 270000 ELSE 0 END) / 1000.0)) AS block_time
      FROM rows x JOIN streams s ON s.n = x.stream_n
), full_rows AS MATERIALIZED (
    SELECT x.*, s.stream_id, s.tag, s.url, s.chain, s.contract, s.hostile,
           floor(extract(epoch FROM x.date - x.block_time) * 1000)::int AS latency_ms,
           s.first_block + (%(last_row)s - x.i) / (2 * %(stream_count)s) AS block,
           e.message, e.group_id,
           CASE WHEN e.n IS NULL THEN (CASE WHEN x.r7 %% 40 = 0 THEN 1 ELSE 0 END)
                ELSE 1 + x.r7 %% 7 END AS retries,
           -- Checksummed addresses come in mixed case; the keys are lower case whatever the payload says.
           CASE WHEN x.r7 %% 2 = 0 THEN '0x' || upper(substr(x.from1, 3)) ELSE x.from1 END AS from1_shown
      FROM timed x
      JOIN streams s ON s.n = x.stream_n
      LEFT JOIN errors e ON e.n = x.error_n
)
INSERT INTO deliveries_delivery (
    id, source_id, date, stream_id, tag, webhook_url, chain_id, confirmed, block_number, records, retries,
    error_message, status, error_group_id, search_keys, tiny_payload, payload, record_hash, first_seen_at,
    updated_at, block_time, latency_ms
)
SELECT f.id, %(source_id)s, f.date, f.stream_id, f.tag, f.url, f.chain, f.confirmed, f.block, 6, f.retries,
       coalesce(f.message, ''),
       CASE WHEN f.message IS NULL THEN 'delivered' WHEN f.retries >= 7 THEN 'failed' ELSE 'retrying' END,
       f.group_id,
       ARRAY(SELECT DISTINCT k FROM unnest(ARRAY[
           'block:' || f.block, 'tx:' || f.tx1, 'tx:' || f.tx2, 'addr:' || f.contract,
           'addr:' || f.from1, 'addr:' || f.to1, 'addr:' || f.from2, 'addr:' || f.to2,
           'topic:' || %(transfer_topic)s,
           'topic:0x000000000000000000000000' || substr(f.from1, 3),
           'topic:0x000000000000000000000000' || substr(f.to1, 3),
           'topic:0x000000000000000000000000' || substr(f.from2, 3),
           'topic:0x000000000000000000000000' || substr(f.to2, 3),
           'event:transfer'
       ]) AS k ORDER BY k),
       jsonb_build_object('chainId', f.chain, 'confirmed', f.confirmed, 'block', f.block::text, 'records', 6,
                          'retries', f.retries),
       jsonb_build_object(
           'block', jsonb_build_object(
               'number', f.block::text,
               'hash', '0x' || md5(f.chain || ':' || f.block) || md5(f.block || ':' || f.chain),
               'timestamp', extract(epoch FROM f.block_time)::bigint::text),
           'chainId', f.chain, 'confirmed', f.confirmed, 'retries', f.retries, 'tag', f.tag,
           'streamId', f.stream_id,
           'logs', jsonb_build_array(
               jsonb_build_object(
                   'logIndex', (f.r7 %% 300)::text, 'transactionHash', f.tx1, 'address', f.contract,
                   'data', '0x' || lpad(to_hex(f.r7), 64, '0'), 'topic0', %(transfer_topic)s::text,
                   'topic1', '0x000000000000000000000000' || substr(f.from1, 3),
                   'topic2', '0x000000000000000000000000' || substr(f.to1, 3), 'topic3', NULL,
                   'triggers', CASE WHEN f.hostile
                       THEN jsonb_build_array(jsonb_build_object('name', %(hostile_text)s::text,
                                                                 'value', %(hostile_text)s::text))
                       ELSE '[]'::jsonb END),
               jsonb_build_object(
                   'logIndex', (f.r7 %% 300 + 3)::text, 'transactionHash', f.tx2, 'address', f.contract,
                   'data', '0x' || lpad(to_hex(f.r7 / 3), 64, '0'), 'topic0', %(transfer_topic)s::text,
                   'topic1', '0x000000000000000000000000' || substr(f.from2, 3),
                   'topic2', '0x000000000000000000000000' || substr(f.to2, 3), 'topic3', NULL)),
           'txs', jsonb_build_array(
               jsonb_build_object(
                   'hash', f.tx1, 'fromAddress', f.from1_shown, 'toAddress', f.contract, 'value', '0',
                   'gas', '65000', 'gasPrice', (20000000000 + f.r7)::text, 'nonce', (f.r7 %% 5000)::text,
                   'input', '0xa9059cbb000000000000000000000000' || substr(f.to1, 3),
                   'transactionIndex', (f.r7 %% 200)::text, 'type', '2', 'receiptStatus', '1',
                   'receiptGasUsed', '51234', 'receiptContractAddress', NULL),
               jsonb_build_object(
                   'hash', f.tx2, 'fromAddress', f.from2, 'toAddress', f.contract, 'value', '0',
                   'gas', '65000', 'gasPrice', (21000000000 + f.r7)::text, 'nonce', (f.r7 %% 700)::text,
                   'input', '0xa9059cbb000000000000000000000000' || substr(f.to2, 3),
                   'transactionIndex', (f.r7 %% 200 + 1)::text, 'type', '2', 'receiptStatus', '1',
                   'receiptGasUsed', '46109', 'receiptContractAddress', NULL)),
           'txsInternal', '[]'::jsonb,
           'erc20Transfers', jsonb_build_array(
               jsonb_build_object('transactionHash', f.tx1, 'contract', f.contract, 'from', f.from1_shown,
                                  'to', f.to1, 'value', (f.r7::bigint * 1000)::text, 'tokenDecimals', '6'),
               jsonb_build_object('transactionHash', f.tx2, 'contract', f.contract, 'from', f.from2,
                                  'to', f.to2, 'value', (f.r7 * 7)::text, 'tokenDecimals', '6')),
           'abi', %(abi)s::jsonb
       ),
       md5(f.id::text), f.date, f.date, f.block_time, f.latency_ms
  FROM full_rows f
 -- A rerun's rows are dated from a later "now": the key (id, date) alone would not skip them.
 WHERE NOT %(rerun)s OR NOT EXISTS (SELECT 1 FROM deliveries_delivery d WHERE d.id = f.id)
ON CONFLICT (id, date) DO NOTHING
"""


def generate_deliveries(
    count: int,
    *,
    source: Source | None = None,
    seed: str = "gen",
    days: float = 30,
    newest: datetime | None = None,
    ends_days_ago: float = 0,
    failure_rate: float = 0.05,
    hostile: bool = False,
    batch: int = 50_000,
    analyze: bool = True,
    from_row: int = 1,
) -> Generated:
    """Insert `count` deliveries (existing ids are skipped) and return what was made. Row n is dated
    `newest` minus n steps of `days`/`count`; `from_row` starts at row n (the rest of an interrupted run, with
    its `newest`)."""
    import time

    started = time.monotonic()
    if count < 1:
        raise ValueError("count must be at least 1")
    if ends_days_ago < 0:
        raise ValueError("ends_days_ago must not be negative")
    newest = (newest or timezone.now()) - timedelta(days=ends_days_ago)
    if source is None:
        source, _ = Source.objects.get_or_create(
            name=f"generated-{seed}",
            defaults={
                "api_key": "",
                "enabled": False,
                "streams_base_url": "https://api.moralis-streams.com",
                "evm_base_url": "https://deep-index.moralis.io",
                "aptos_mainnet_base_url": "https://mainnet-aptos-api.moralis.io",
                "aptos_testnet_base_url": "https://testnet-aptos-api.moralis.io",
            },
        )
    messages = list(ERROR_MESSAGES) + (list(HOSTILE_ERROR_MESSAGES) if hostile else [])
    group_ids = [_error_group(message, newest).pk for message in messages]
    ids = [stream_id(seed, n) for n in range(len(STREAMS))]
    tags = [HOSTILE_TAG if hostile and n == len(STREAMS) - 1 else s[0] for n, s in enumerate(STREAMS)]
    params: dict[str, Any] = {
        "seed": seed,
        "row_seed": row_seed(seed, ends_days_ago),
        "source_id": source.pk,
        "newest": newest,
        "step": days * 86400 / count,
        "stream_ids": ids,
        "tags": tags,
        "urls": [s[2] for s in STREAMS],
        "chains": [s[1] for s in STREAMS],
        "contracts": [s[3] for s in STREAMS],
        "first_blocks": [s[4] for s in STREAMS],
        "hostile_streams": [hostile and n == len(STREAMS) - 1 for n in range(len(STREAMS))],
        "finality_ms": [_finality_ms(s[1]) for s in STREAMS],
        "stream_count": len(STREAMS),
        "messages": messages,
        "group_ids": group_ids,
        "error_count": len(messages),
        "failure_permille": round(failure_rate * 1000),
        # About 80 rows per address at any size: a realistic "popular wallet" search.
        "pool": max(100, count // 20),
        "last_row": count,
        "transfer_topic": TRANSFER_TOPIC,
        "abi": orjson.dumps(ERC20_TRANSFER_ABI).decode(),
        "hostile_text": HOSTILE_PAYLOAD_TEXT,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        take_write_lock(cursor)
        ensure_partitions_between(cursor, newest - timedelta(days=days), newest)
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM deliveries_delivery WHERE id = %s)",
            [delivery_id(params["row_seed"], max(1, from_row))],
        )
        (params["rerun"],) = cursor.fetchone()
    with connection.cursor() as cursor:
        for first in range(max(1, from_row), count + 1, batch):
            with transaction.atomic():
                cursor.execute(_INSERT, {**params, "first": first, "last": min(count, first + batch - 1)})
    # Rollups, stream rows and error-group counts as ingest would have left them for these rows.
    rebuild_derived(source.pk)
    if analyze:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE deliveries_delivery")
    return Generated(source, count, tuple(ids), time.monotonic() - started)


def _finality_ms(chain_id: str) -> int:
    chain = find_chain(chain_id)
    return (chain.finality_seconds if chain is not None else 900) * 1000


def _error_group(message: str, seen: datetime) -> ErrorGroup:
    template = error_template(message)
    group, _ = ErrorGroup.objects.get_or_create(
        fingerprint=error_fingerprint(template),
        defaults={"template": template, "first_seen": seen, "last_seen": seen},
    )
    return group
