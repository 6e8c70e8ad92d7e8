from __future__ import annotations

import copy
import cProfile
import io
import pstats
import random
import re
import statistics
import time
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection, transaction

from dashboard.deliveries import partitions
from dashboard.deliveries.ingest import StoreResult, copy_rows, store_parsed
from dashboard.deliveries.records import parse_records
from dashboard.polling.models import WalkKind
from dashboard.polling.walks import walk_history
from dashboard.sources.models import Source
from dashboard.upstream.client import ClientSettings, UpstreamClient

TABLES = (
    "deliveries_delivery", "deliveries_errorgroup", "deliveries_errorgroupstream", "deliveries_errormessage",
    "deliveries_hourlyrollup", "deliveries_periodrollup", "deliveries_eventrollup", "deliveries_eventperiodrollup",
    "deliveries_streamperiodrollup", "deliveries_stream", "deliveries_deliverychange", "deliveries_rollupchanges",
    # The walk's source and checkpoint.
    "deliveries_source", "deliveries_historywalk",
)
SCHEMAS = ("bench_copy", "bench_upsert", "bench_walk")
ERRORS = (
    "connect ECONNREFUSED 203.0.113.{n}:443",
    "timeout of 10000ms exceeded",
    "Request failed with status code 502",
    "getaddrinfo ENOTFOUND hook{n}.example.com",
)


class Command(BaseCommand):
    help = (
        "Measure the ingest write path against plain binary COPY into the same schema, in scratch schemas "
        "that are dropped afterwards (the real tables are not touched)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rows", type=int, default=20_000)
        parser.add_argument("--batch", type=int, default=1_000, help="Rows per transaction (a poll page is 100).")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--interval", type=float, default=6.0, metavar="SECONDS",
            help="Seconds between two records' dates (0.0864 is a million a day, as dense as the heaviest streams).",
        )
        parser.add_argument("--rounds", type=int, default=3, help="Rounds on fresh tables; medians are shown.")
        parser.add_argument(
            "--profile", type=int, default=0, metavar="N",
            help="Also run parsing and the write path once more under cProfile and print its N top functions.",
        )
        parser.add_argument(
            "--statements", action="store_true",
            help="Also run the write path of new rows once more with each SQL statement timed, and print where its "
                 "time goes (the COPY itself and Python are what the statements leave).",
        )
        parser.add_argument(
            "--memory", action="store_true",
            help="Also walk the history once more under tracemalloc and print the peak of what the walk allocated "
                 "(pages read, parsed and being stored) beside one page's worth.",
        )

    def handle(
        self, *args: Any, rows: int, batch: int, seed: int, rounds: int, profile: int = 0, interval: float = 6.0,
        statements: bool = False, memory: bool = False, **options: Any,
    ) -> None:
        records = _records(rows, random.Random(seed), interval)
        size = sum(len(r["payload_bytes"]) for r in records) / len(records)
        for r in records:
            del r["payload_bytes"]
        self.stdout.write(
            f"{rows} records, ~{size / 1024:.1f} KB payload each, {batch} per transaction, {interval:g} s apart"
        )
        with connection.cursor() as cursor:
            cursor.execute("SHOW default_toast_compression")
            self.stdout.write(f"server default TOAST compression: {cursor.fetchone()[0]}")
        timings: dict[str, list[float]] = {
            "copy": [], "new": [], "unchanged": [], "changed": [], "parse": [], "new_cpu": [], "walk": [],
            "walk_cpu": [],
        }
        pages = _pages(records, batch)
        try:
            for _round in range(rounds):
                # COPY and upsert alternate on fresh tables, so a busy machine slows both alike.
                for schema in SCHEMAS:
                    _make_schema(schema)
                # Parsing is this process's own work: its CPU time, which other work on the machine barely moves.
                started = time.process_time()
                parsed = parse_records(records, [])
                timings["parse"].append(time.process_time() - started)
                timings["copy"].append(_timed(_plain_copy, parsed, batch))
                cpu = time.process_time()
                timings["new"].append(_timed(_upsert, parsed, batch))
                timings["new_cpu"].append(time.process_time() - cpu)
                timings["unchanged"].append(_timed(_upsert, parsed, batch))
                cpu = time.process_time()
                timings["walk"].append(_timed(_walk, pages, batch))
                timings["walk_cpu"].append(time.process_time() - cpu)
                edited = copy.deepcopy(records)
                for r in edited[::10]:
                    r["tinyPayload"]["retries"] += 1
                    r["payload"]["retries"] += 1
                    r["errorMessage"] = "socket hang up"
                changed = parse_records(edited, [])
                timings["changed"].append(_timed(_upsert, changed, batch))
        finally:
            _drop_schemas()
        copy_seconds, upsert_seconds, unchanged_seconds, changed_seconds, parse_seconds, walk_seconds = (
            statistics.median(timings[k]) for k in ("copy", "new", "unchanged", "changed", "parse", "walk")
        )

        def line(label: str, seconds: float) -> str:
            return f"{label:<58} {rows / seconds:>10,.0f} rows/s  ({seconds:.2f} s)"

        self.stdout.write(line("plain COPY binary into the same schema (no derived data)", copy_seconds))
        self.stdout.write(line("write path, new rows (digests read, COPY, groups, rollups, streams)", upsert_seconds))
        self.stdout.write(line("write path, same rows again (all unchanged, nothing written)", unchanged_seconds))
        self.stdout.write(line("write path, 10 % of rows changed (staged and rewritten)", changed_seconds))
        self.stdout.write(line("parsing in Python (decoding, search keys, digest; CPU time)", parse_seconds))
        self.stdout.write(line("walk, new rows (pages read and parsed while the last is stored)", walk_seconds))
        self.stdout.write(f"write path / COPY, new rows, write only:      {copy_seconds / upsert_seconds:.2f}")
        self.stdout.write(
            f"write path / COPY, new rows, parsing included: {copy_seconds / (upsert_seconds + parse_seconds):.2f}"
            " (one after the other)"
        )
        self.stdout.write(f"walk / COPY, new rows, parsing included:       {copy_seconds / walk_seconds:.2f}")
        # The spread between rounds, and how much of the write path's time is this process's own CPU: what moves
        # between identical rounds is the server's (checkpoints, WAL writes), not the client's work.
        ratios = ", ".join(f"{c / n:.2f}" for c, n in zip(timings["copy"], timings["new"], strict=True))
        self.stdout.write(f"write path / COPY, new rows, each round:      {ratios}")
        ratios = ", ".join(f"{c / w:.2f}" for c, w in zip(timings["copy"], timings["walk"], strict=True))
        self.stdout.write(f"walk / COPY, new rows, each round:            {ratios}")
        self.stdout.write(
            f"write path, new rows, this process's CPU time: {statistics.median(timings['new_cpu']):.2f} s "
            f"of {upsert_seconds:.2f} s"
        )
        self.stdout.write(
            f"walk, new rows, this process's CPU time:       {statistics.median(timings['walk_cpu']):.2f} s "
            f"of {walk_seconds:.2f} s"
        )
        if memory:
            try:
                _make_schema("bench_walk")
                self._memory(pages, batch)
            finally:
                _drop_schemas()
        for wanted, run in ((profile, self._profile), (statements, self._statements)):
            if not wanted:
                continue
            try:
                _make_schema("bench_upsert")
                run(records, batch, profile)
            finally:
                _drop_schemas()

    def _memory(self, pages: list[bytes], batch: int) -> None:
        """The walk's peak allocation: what it holds at once (pages read ahead, parsed, being stored)."""
        tracemalloc.start()
        try:
            _walk(pages, batch)
            _current, peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            # One page's records parsed: the size a walk holding a page or two stays near.
            rejected: list[str] = []
            before = tracemalloc.get_traced_memory()[0]
            page = parse_records(orjson.loads(pages[0])["result"], rejected)
            one_page = tracemalloc.get_traced_memory()[0] - before
            del page
        finally:
            tracemalloc.stop()
        self.stdout.write(
            f"walk of {len(pages)} pages of {batch}, peak allocated under tracemalloc: {peak / 2**20:.1f} MB "
            f"(one page, decoded and parsed: {one_page / 2**20:.1f} MB)"
        )

    def _statements(self, records: list[dict[str, Any]], batch: int, _top: int) -> None:
        """The write path of new rows with each statement it sends timed, grouped by the statement's start."""
        parsed = parse_records(records, [])
        spent: dict[str, list[float]] = {}

        def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                spent.setdefault(" ".join(sql.split())[:72], []).append(time.perf_counter() - started)

        _checkpoint()
        with connection.execute_wrapper(timed):
            started = time.perf_counter()
            _upsert(parsed, batch)
            total = time.perf_counter() - started
        self.stdout.write(f"each statement of the write path, {len(parsed)} new rows ({total:.2f} s):")
        for text, seconds in sorted(spent.items(), key=lambda item: -sum(item[1])):
            self.stdout.write(f"{sum(seconds) * 1000:>9.1f} ms {len(seconds):>5}×  {text}")
        rest = total - sum(sum(seconds) for seconds in spent.values())
        self.stdout.write(f"{rest * 1000:>9.1f} ms        the COPY of the rows and Python between statements")

    def _profile(self, records: list[dict[str, Any]], batch: int, top: int) -> None:
        """Parsing and the write path of new rows, page by page as a poll does, under cProfile."""
        profiler = cProfile.Profile()
        profiler.enable()
        for start in range(0, len(records), batch):
            _upsert(parse_records(records[start : start + batch], []), batch)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        total = stats.total_tt  # type: ignore[attr-defined]
        out.write(f"cProfile of parsing and writing {len(records)} new rows ({total:.2f} s under the profiler)\n")
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
        self.stdout.write(_short_paths(out.getvalue()))


def _short_paths(text: str) -> str:
    """Profile lines with paths from the package or site-packages down, so they fit a terminal."""
    return re.sub(r"\S*/(site-packages|dashboard)/", lambda m: "" if m.group(1) == "site-packages" else "dashboard/", text)


def _timed(work: Any, *args: Any) -> float:
    _checkpoint()
    started = time.perf_counter()
    work(*args)
    return time.perf_counter() - started


def _checkpoint() -> None:
    """Write out the dirty pages the last timed run left, so that the next one does not pay for them: a
    checkpoint falling inside one run moved the write path's time by up to a third between identical rounds.
    Needs a superuser or the pg_checkpoint role; without one the runs are timed as they come."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except DatabaseError:
        pass


def _make_schema(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        cursor.execute(f"CREATE SCHEMA {name}")
        for table in TABLES:
            # Same columns, indexes, defaults and TOAST compression as the real table; no foreign keys. The
            # deliveries partitioned by week as the real one.
            partitioned = " PARTITION BY RANGE (date)" if table == partitions.PARENT else ""
            cursor.execute(f"CREATE TABLE {name}.{table} (LIKE public.{table} INCLUDING ALL){partitioned}")
        cursor.execute(f"SET search_path TO {name}, public")
        try:
            # As many weeks as 90 days of history have (a record's id is looked up in each), before the clock.
            partitions.ensure_partitions_between(
                cursor, RECORDS_START - timedelta(days=91), RECORDS_START + timedelta(days=7)
            )
        finally:
            cursor.execute("SET search_path TO DEFAULT")


def _plain_copy(parsed: list[Any], batch: int) -> None:
    now = datetime.now(UTC)
    for start in range(0, len(parsed), batch):
        with transaction.atomic(), connection.cursor() as cursor:
            copy_rows(cursor, "bench_copy.deliveries_delivery", 1, parsed[start : start + batch], {}, now)


def _drop_schemas() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET search_path TO DEFAULT")
        for schema in SCHEMAS:
            cursor.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _pages(records: list[dict[str, Any]], batch: int) -> list[bytes]:
    """The records as the upstream's `/history` answers, `batch` records a page (a real upstream gives at most
    100), encoded before anything is timed."""
    starts = range(0, len(records), batch)
    return [
        orjson.dumps({
            "result": records[start : start + batch], "total": len(records),
            "cursor": str(start + batch) if start + batch < len(records) else None,
        })
        for start in starts
    ]


def _walk(pages: list[bytes], batch: int) -> None:
    """A backfill walk as a poll runs it (`walk_history`: each page fetched, its JSON decoded, parsed and
    stored with its checkpoint, the next read while this one is stored) of an upstream answering in-process."""

    def answer(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        number = int(cursor) // batch if cursor else 0
        return httpx.Response(200, content=pages[number], headers={"Content-Type": "application/json"})

    client = UpstreamClient("http://upstream.invalid", ClientSettings(api_key="bench"), transport=httpx.MockTransport(answer))
    with connection.cursor() as cursor:
        # Unqualified table names (the source, its checkpoint, the write path's) resolve to the scratch schema.
        cursor.execute("SET search_path TO bench_walk, public")
        cursor.execute("DROP TABLE IF EXISTS pg_temp.deliveries_delivery_stage")
    try:
        source = Source.objects.create(name="bench", api_key="bench")
        outcome = walk_history(source, WalkKind.BACKFILL, client=client, stop_before=None)
        if not (outcome.complete and outcome.pages == len(pages)):
            raise CommandError(f"the walk stopped after {outcome.pages} of {len(pages)} pages")
    finally:
        client.close()
        with connection.cursor() as cursor:
            cursor.execute("SET search_path TO DEFAULT")


def _upsert(parsed: list[Any], batch: int) -> None:
    with connection.cursor() as cursor:
        # Unqualified table names in the write path resolve to the scratch schema first.
        cursor.execute("SET search_path TO bench_upsert, public")
        cursor.execute("DROP TABLE IF EXISTS pg_temp.deliveries_delivery_stage")
    try:
        for start in range(0, len(parsed), batch):
            store_parsed(1, parsed[start : start + batch], StoreResult())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET search_path TO DEFAULT")


def _hex(r: random.Random, nbytes: int) -> str:
    return "0x" + r.randbytes(nbytes).hex()


# The first record's date; each next one `interval` seconds later.
RECORDS_START = datetime(2026, 1, 1, tzinfo=UTC)
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
ERC20_ABI = [
    {"anonymous": False, "name": "Transfer", "type": "event", "inputs": [
        {"indexed": True, "name": "from", "type": "address"}, {"indexed": True, "name": "to", "type": "address"},
        {"indexed": False, "name": "value", "type": "uint256"}]},
    {"name": "transfer", "type": "function", "stateMutability": "nonpayable", "outputs": [{"name": "", "type": "bool"}],
     "inputs": [{"name": "to", "type": "address"}, {"name": "amount", "type": "uint256"}]},
]


def _word(value: int) -> str:
    return f"0x{value:064x}"


def _padded(address: str) -> str:
    return "0x" + address[2:].rjust(64, "0")


def _records(count: int, r: random.Random, interval: float = 6.0) -> list[dict[str, Any]]:
    """Records shaped like the upstream's, with ~5 KB EVM payloads (logs, txs, internal txs, transfers)."""
    start = RECORDS_START
    streams = [str(uuid.UUID(int=r.getrandbits(128))) for _ in range(6)]
    out = []
    for n in range(count):
        stream = streams[n % len(streams)]
        block = 19_000_000 + n // 2
        tx = _hex(r, 32)
        addr = [_hex(r, 20) for _ in range(4)]
        failing = r.random() < 0.1
        retries = r.randint(0, 7) if failing else r.choice((0, 0, 0, 1))
        date = start + timedelta(seconds=n * interval)
        # Mined 1-5 s before the delivery (Ethereum's 12 confirmations, 144 s, more for a confirmed one).
        mined = int(date.timestamp()) - r.randint(1, 5) - (144 if n % 2 else 0)
        payload = {
            "block": {"number": str(block), "hash": _hex(r, 32), "timestamp": str(mined)},
            "chainId": "0x1",
            # ERC-20 transfers the payload's ABI decodes, as a token stream's are (decoding is part of parsing)
            "logs": [
                {"logIndex": str(i), "transactionHash": tx, "address": addr[0], "data": _word(r.getrandbits(64)),
                 "topic0": TRANSFER_TOPIC, "topic1": _padded(addr[1]), "topic2": _padded(addr[3]), "topic3": None,
                 "triggers": [{"name": "fromBalance", "value": str(r.getrandbits(64))}]}
                for i in range(3)
            ],
            "txs": [
                {"hash": tx, "gas": "21000", "gasPrice": str(r.getrandbits(40)), "nonce": str(n),
                 "input": "0xa9059cbb" + _padded(addr[3])[2:] + _word(r.getrandbits(64))[2:], "transactionIndex": "3", "fromAddress": addr[1], "toAddress": addr[2],
                 "value": str(r.getrandbits(60)), "type": "2", "v": "1", "r": _hex(r, 32), "s": _hex(r, 32),
                 "receiptCumulativeGasUsed": "123456", "receiptGasUsed": "21000", "receiptContractAddress": None,
                 "receiptRoot": None, "receiptStatus": "1"}
            ],
            "txsInternal": [{"from": addr[2], "to": addr[3], "value": "1", "transactionHash": tx, "gas": "2300"}],
            "erc20Transfers": [
                {"transactionHash": tx, "logIndex": "1", "contract": addr[0], "from": addr[1], "to": addr[3],
                 "value": str(r.getrandbits(64)), "tokenName": "Token", "tokenSymbol": "TKN", "tokenDecimals": "18"}
            ],
            "abi": ERC20_ABI,
            "retries": retries,
            "confirmed": n % 2 == 1,
            "tag": f"tag-{stream[:4]}",
            "streamId": stream,
        }
        record = {
            "id": str(uuid.UUID(int=r.getrandbits(128), version=4)),
            "date": date.isoformat().replace("+00:00", "Z"),
            "tinyPayload": {"chainId": "0x1", "confirmed": n % 2 == 1, "block": str(block), "records": 5,
                            "retries": retries},
            "errorMessage": r.choice(ERRORS).format(n=r.randint(1, 250)) if failing else "",
            "webhookUrl": f"https://hooks.example.com/{stream[:8]}",
            "streamId": stream,
            "tag": f"tag-{stream[:4]}",
            "payload": payload,
            "payload_bytes": orjson.dumps(payload),
        }
        out.append(record)
    return out
