"""A backup (`pg_dump --format=custom`) restored with `pg_restore --jobs 2` into an empty database holds every row of
every table and the same schema, its derived data still equals what the deliveries recompute to, and `migrate` has
nothing to do; after restoring an older backup, polling brings back what the provider still holds (README: Backup
and restore)."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection, connections
from psycopg.conninfo import make_conninfo

from dashboard.deliveries.models import Delivery
from dashboard.polling.walks import HEAD_OVERLAP, poll
from dashboard.sources.models import Source
from tests.checks import (
    assert_derived_exact,
    assert_matches_upstream,
    assert_nothing_extra,
    server_conninfo,
    subprocess_database_url,
    truth,
)
from tests.conftest import START, make_user
from tests.factories import history_record, make_source, source_for, store
from tests.polling.children import manage

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass(frozen=True)
class ClientTools:
    pg_dump: Path
    pg_restore: Path


@pytest.fixture
def tools() -> ClientTools:
    """pg_dump and pg_restore of one installation whose major version is at least the server's (an older pg_dump
    refuses a newer server): the machine's (PATH), else the pgserver package's that `make test` may run on."""
    connection.ensure_connection()
    server = connection.pg_version // 10000
    directories = [Path(found).parent] if (found := shutil.which("pg_dump")) else []
    with contextlib.suppress(ImportError):
        from pgserver._commands import POSTGRES_BIN_PATH

        directories.append(Path(POSTGRES_BIN_PATH))
    seen = []
    for directory in directories:
        dump, restore = directory / "pg_dump", directory / "pg_restore"
        if not (dump.exists() and restore.exists()):
            continue
        answer = subprocess.run([dump, "--version"], capture_output=True, text=True, check=True).stdout
        version = re.search(r"\(PostgreSQL\) (\d+)", answer)
        seen.append(f"{dump} ({answer.strip()})")
        if version is not None and int(version.group(1)) >= server:
            return ClientTools(dump, restore)
    pytest.skip(
        f"needs pg_dump and pg_restore of Postgres {server} or later (the server's major version); "
        f"found {', '.join(seen) or 'neither on PATH nor in the pgserver package'}"
    )


def conninfo(database: str) -> str:
    return make_conninfo(server_conninfo(), dbname=database)


def backup(tools: ClientTools, directory: Path) -> Path:
    """The test database as an operator backs it up."""
    dump = directory / f"backup-{uuid.uuid4().hex[:8]}.dump"
    done = subprocess.run(
        [tools.pg_dump, "--format=custom", f"--file={dump}", f"--dbname={conninfo(connection.settings_dict['NAME'])}"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return dump


@contextlib.contextmanager
def restored(tools: ClientTools, dump: Path) -> Iterator[str]:
    """`dump` restored into a new, empty database of the same server, as a Django alias of this process (for the
    shared checks); the database is dropped afterwards."""
    name = f"{connection.settings_dict['NAME']}_restored_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_conninfo(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    alias = "restored"
    try:
        done = subprocess.run(
            [tools.pg_restore, "--jobs=2", "--exit-on-error", f"--dbname={conninfo(name)}", dump],
            capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stderr
        connections.settings[alias] = {**connections["default"].settings_dict, "NAME": name, "CONN_MAX_AGE": 0}
        # Connected here: the test case refuses to open a connection of an alias it was not declared with (one
        # that did not exist then, and that it must not flush afterwards).
        connections[alias].connect()
        yield alias
    finally:
        if alias in connections.settings:
            connections[alias].close()
            del connections.settings[alias]
            with contextlib.suppress(AttributeError):
                delattr(connections._connections, alias)
        with psycopg.connect(server_conninfo(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_manage(alias: str, *args: str) -> str:
    """A manage.py command in a child process on the database behind `alias`; its output."""
    url = subprocess_database_url().rsplit("/", 1)[0] + "/" + quote(connections[alias].settings_dict["NAME"], safe="")
    child = manage(*args, DATABASE_URL=url)
    output, _ = child.communicate(timeout=300)
    assert child.returncode == 0, output
    return output


# The schema as pg_dump must carry it: columns (types, defaults, TOAST compression), tables' options and partition
# bounds, indexes, constraints, triggers (the actions' append-only ones) and their functions, sequences' positions.
SCHEMA_QUERIES = {
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attcompression,
               pg_get_expr(d.adbin, d.adrelid)
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
    """,
    "relations": """
        SELECT relname, relkind, relpersistence, reloptions::text, pg_get_expr(relpartbound, oid)
          FROM pg_class WHERE relnamespace = 'public'::regnamespace
    """,
    "indexes": """
        SELECT pg_get_indexdef(indexrelid) FROM pg_index JOIN pg_class c ON c.oid = indexrelid
         WHERE c.relnamespace = 'public'::regnamespace
    """,
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
         WHERE connamespace = 'public'::regnamespace
    """,
    "triggers": "SELECT tgrelid::regclass::text, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal",
    "functions": "SELECT pg_get_functiondef(oid) FROM pg_proc WHERE pronamespace = 'public'::regnamespace",
    "sequences": "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'",
}


def without_casts(definition: Any) -> Any:
    """A definition with its casts and parentheses left out: an expression read back from a dump's SQL comes back
    cast otherwise (`kind IN ('a', 'b')` on a varchar: `ARRAY[('a'::character varying)::text, …]` before,
    `(ARRAY['a'::character varying, …])::text[]` after); the columns' types are compared apart."""
    if not isinstance(definition, str):
        return definition
    return re.sub(r"::[a-z ]+(\[\])?|[()]", "", definition)


def schema(alias: str) -> dict[str, list[tuple[Any, ...]]]:
    with connections[alias].cursor() as cursor:
        found = {}
        for name, sql in SCHEMA_QUERIES.items():
            cursor.execute(sql)
            rows = cursor.fetchall()
            if name in ("indexes", "constraints"):
                rows = [tuple(without_casts(value) for value in row) for row in rows]
            found[name] = sorted(rows, key=repr)
        return found


def contents(alias: str) -> dict[str, tuple[int, str]]:
    """Each table's row count and the md5 of its rows' text, in one order (the partitioned deliveries table and each
    of its partitions apart, so a row must come back in its own week)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT oid::regclass::text FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
        )
        tables = sorted(name for (name,) in cursor.fetchall())
        found = {}
        for table in tables:
            cursor.execute(
                f"SELECT count(*), md5(COALESCE(string_agg(t::text, E'\\n' ORDER BY t::text COLLATE \"C\"), ''))"
                f" FROM {table} t"
            )
            found[table] = cursor.fetchone()
        return found


def erc20_payload(block: int, n: int) -> dict[str, Any]:
    """A payload as the provider sends one for an ERC-20 transfer: block, log with its ABI, transaction."""
    tx = f"0x{n:064x}"
    sender, receiver, token = "0x" + "a1" * 20, "0x" + "b2" * 20, "0x" + "c3" * 20
    return {
        "block": {"number": str(block), "hash": "0x" + "12" * 32, "timestamp": "1772395200"},
        "chainId": "0x89",
        "logs": [{"logIndex": "3", "transactionHash": tx, "address": token,
                  "data": "0x" + f"{10**18 * n:064x}",
                  "topic0": "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                  "topic1": "0x" + "0" * 24 + sender[2:], "topic2": "0x" + "0" * 24 + receiver[2:], "topic3": None}],
        "txs": [{"hash": tx, "fromAddress": sender, "toAddress": token, "value": "0", "gas": "65000",
                 "gasPrice": "30000000000", "nonce": str(n), "input": "0xa9059cbb", "transactionIndex": "7",
                 "receiptStatus": "1"}],
        "erc20Transfers": [{"transactionHash": tx, "logIndex": "3", "contract": token, "from": sender,
                            "to": receiver, "value": str(10**18 * n), "tokenName": "USD Coin", "tokenSymbol": "USDC",
                            "tokenDecimals": "6", "possibleSpam": False}],
        "abi": [{"type": "event", "name": "Transfer", "anonymous": False, "inputs": [
            {"type": "address", "name": "from", "indexed": True},
            {"type": "address", "name": "to", "indexed": True},
            {"type": "uint256", "name": "value", "indexed": False}]}],
    }


def test_a_restored_backup_holds_every_row_and_derived_data_that_checks_out(
    make_simulator: Callable[..., Any], tools: ClientTools, tmp_path: Path
) -> None:
    # The simulator's two days of history (six streams, their payloads, failing deliveries with their errors), and a
    # second source's own records: another stream three weeks older (another week partition), one without a
    # payload, one changed in place by a later retry, error texts with non-ASCII characters and a NUL.
    sim = make_simulator()
    source = source_for(sim)
    records = sim.world.history_records(include_payload=True)
    for start in range(0, len(records), 500):
        assert not store(source, *records[start:start + 500]).rejected
    other = make_source("second")
    stream = "5e1f0c2a-7b3d-4c8e-9f10-2a3b4c5d6e7f"
    older = START - timedelta(days=21)
    own = [
        history_record(date=older + timedelta(hours=i * 7), stream_id=stream, tag="treasury", chain="0x89",
                       webhook_url=f"https://hooks.example.com/treasury/{i % 2}", block=50_000_000 + i,
                       confirmed=i % 2 == 0, error="" if i % 4 else f"status code 50{i % 3}: Bad Gateway ↯ {i}",
                       retries=0 if i % 4 else i % 7 + 1, payload=erc20_payload(50_000_000 + i, i + 1))
        for i in range(40)
    ]
    own.append(history_record(date=older, stream_id=stream, tag="treasury", payload=None,
                              error="connect ECONNREFUSED 203.0.113.7:443 \x00 — Zürich", retries=7))
    store(other, *own)
    changed = history_record(record_id=own[0]["id"], date=older, stream_id=stream, tag="treasury", chain="0x89",
                             webhook_url=own[0]["webhookUrl"], block=50_000_000, retries=3,
                             error="timeout of 10000ms exceeded", payload=erc20_payload(50_000_000, 1))
    assert store(other, changed).updated == 1
    make_user("alice", staff=True)
    assert_derived_exact()

    dump = backup(tools, tmp_path)
    with restored(tools, dump) as alias:
        original, copy = contents("default"), contents(alias)
        assert copy == original
        # The history and every table derived from it came back, not only empty tables.
        for table in ("deliveries_delivery", "deliveries_deliverychange", "deliveries_errorgroup",
                      "deliveries_errormessage", "deliveries_hourlyrollup", "deliveries_periodrollup",
                      "deliveries_eventrollup", "deliveries_eventperiodrollup", "deliveries_streamperiodrollup",
                      "deliveries_stream", "deliveries_source", "auth_user"):
            assert copy[table][0] > 0, table
        assert copy["deliveries_delivery"][0] == len(records) + len(own)
        assert len([t for t in copy if t.startswith("deliveries_delivery_p")]) >= 3
        restored_schema, original_schema = schema(alias), schema("default")
        for part, rows in original_schema.items():
            assert restored_schema[part] == rows, (
                part, set(rows) - set(restored_schema[part]), set(restored_schema[part]) - set(rows)
            )
        assert_derived_exact(alias)
        assert "No migrations to apply" in run_manage(alias, "migrate")


def test_deliveries_newer_than_an_older_backup_come_back_while_the_provider_still_holds_them(
    make_simulator: Callable[..., Any], tools: ClientTools, tmp_path: Path, no_stale_locks: None
) -> None:
    """The provider keeps `history_window_days` (two here, seven in production). Restored 54 hours after its backup,
    the source's next poll reads back to the backup's sync point and stores every delivery since that the provider
    still shows; the deliveries that left the provider's window meanwhile are lost to the restored database;
    `backfill_history --restart` then brings every record the provider shows up to date (retries since)."""
    sim = make_simulator()
    source = source_for(sim)
    for _ in range(5):
        if poll(source).complete:
            break
    source.refresh_from_db()
    assert source.synced_through is not None
    dump = backup(tools, tmp_path)
    backed_up = set(Delivery.objects.values_list("id", flat=True))

    # The original database goes on polling, often enough to store every delivery before it leaves the window.
    for hours in (24, 24, 6):
        sim.world.clock.advance(hours * 3600)
        for _ in range(20):
            if poll(Source.objects.get(pk=source.pk)).complete:
                break
    kept = dict(Delivery.objects.values_list("id", "date"))

    with restored(tools, dump) as alias:
        assert set(Delivery.objects.using(alias).values_list("id", flat=True)) == backed_up
        run_manage(alias, "poll_history", "--once", "--source", source.name)
        shown = {record_id: datetime.fromisoformat(r["date"].replace("Z", "+00:00")) for record_id, r in truth(sim).items()}
        stored = set(Delivery.objects.using(alias).values_list("id", flat=True))
        # The head walk read down to the backup's sync point: every record the provider shows from there on is back.
        since_backup = {i for i, date in shown.items() if date >= source.synced_through - HEAD_OVERLAP}
        assert since_backup - stored == set()
        assert since_backup - backed_up

        run_manage(alias, "backfill_history", "--source", source.name, "--restart", "--no-progress")
        assert_matches_upstream(sim, alias)
        assert_nothing_extra(sim, alias)
        assert_derived_exact(alias)
        # What the original stored and the restored database lacks: exactly the deliveries dated after the backup
        # and before the provider's window now begins.
        lost = set(kept) - set(Delivery.objects.using(alias).values_list("id", flat=True))
        oldest_shown = min(shown.values())
        assert lost
        assert lost == {i for i, date in kept.items() if i not in backed_up and date < oldest_shown}
        assert all(source.synced_through < kept[i] for i in lost)
