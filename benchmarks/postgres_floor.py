"""PostgreSQL: governed synchronous calls against the asyncpg one-statement-per-unit floor.

In the same run, interleaved round by round so machine noise hits every column alike:

- floor: asyncpg, no SQLAlchemy, no pipeline, each of a governed call's two units of work as
  ONE statement (a data-modifying CTE, autocommit: one round trip, one commit each) writing the
  same rows: reservation + run + chain-head bump + 5 chained audit rows; then compare-and-set +
  completion + head bump + 1 audit row, the completion and audit only if the compare-and-set won;
- governed: ``Runtime.propose`` of the same action through ``SqlStore`` (SQLAlchemy Core over
  asyncpg), one caller, and 8 concurrent callers on one runtime (floor: 8 connections).

Also counts what one governed call sends: round trips (writes to the server's socket), and
the statements, BEGINs and COMMITs SQLAlchemy saw.
The server comes from ``SIGNOFF_BENCH_POSTGRES_URL`` (or ``SIGNOFF_TEST_POSTGRES_URL``); a
scratch database is created and dropped.

    .venv/bin/python benchmarks/postgres_floor.py [--calls 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_throughput import (  # noqa: E402
    TERMINAL,
    Caller,
    Payload,
    Scratch,
    capture,
    ids,
    runtime_on,
    server,
)
from tests.helpers import socket_writes  # noqa: E402

from signoff.store.sql import SqlStore, open_sql_store  # noqa: E402

HASH = "0" * 64
NOT_TERMINAL = ",".join(f"'{s}'" for s in TERMINAL)

CREATE_UNIT = f"""
WITH dup AS (
  INSERT INTO signoff_duplicates (scope_hash, tenant_id, action_id, idempotency_key, visibility,
    owner_run_id, state, input_hash, result, created_at, completed_at)
  VALUES ($1, $2, 'invoice.cancel', $3, 'resource:x', $3, 'RUNNING', $4, NULL, $5, NULL)
  ON CONFLICT (scope_hash) DO NOTHING RETURNING 1
), run AS (
  INSERT INTO signoff_runs (run_id, tenant_id, action_id, status, version, principal_id,
    idempotency_key, created_at, updated_at, data)
  SELECT $3, $2, 'invoice.cancel', 'RUNNING', 1, 'agent-1', $3, $5, $5, $6 FROM dup
  RETURNING 1
), head AS (
  INSERT INTO signoff_audit_heads (tenant_id, chain_seq, head_hash)
  SELECT $2, $7::bigint, '{HASH}' FROM run
  ON CONFLICT (tenant_id) DO UPDATE
    SET chain_seq = signoff_audit_heads.chain_seq + $7::bigint, head_hash = '{HASH}'
  RETURNING chain_seq
)
INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, code, data,
  chain_seq, prev_hash, hash)
SELECT $3, $2, e.kind, $5, e.actor, e.status, e.code, e.data,
  head.chain_seq - $7::bigint + e.n, '{HASH}', '{HASH}'
FROM head, unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
  WITH ORDINALITY AS e(kind, actor, status, code, data, n)
"""

SETTLE_UNIT = f"""
WITH cas AS (
  UPDATE signoff_runs SET status = 'SUCCEEDED', version = $2::int + 1, updated_at = $3, data = $4
  WHERE run_id = $1 AND version = $2 AND status NOT IN ({NOT_TERMINAL})
  RETURNING tenant_id
), done AS (
  UPDATE signoff_duplicates SET state = 'COMPLETED', result = $5, completed_at = $3
  WHERE scope_hash = $6 AND owner_run_id = $1 AND state = 'RUNNING' AND EXISTS (SELECT 1 FROM cas)
), head AS (
  UPDATE signoff_audit_heads SET chain_seq = chain_seq + 1, head_hash = '{HASH}'
  WHERE tenant_id = (SELECT tenant_id FROM cas)
  RETURNING chain_seq
)
INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, code, data,
  chain_seq, prev_hash, hash)
SELECT $1, (SELECT tenant_id FROM cas), $7, $3, $8, $9, $10, $11, head.chain_seq, '{HASH}',
  '{HASH}'
FROM head
"""


class Floor:
    """asyncpg connections, each unit one prepared statement in autocommit."""

    def __init__(self, url: str, payload: Payload) -> None:
        self.url = make_url(url)
        self.payload = payload
        self.conns: list[Any] = []

    async def open(self, n: int) -> None:
        import asyncpg

        u = self.url
        while len(self.conns) < n:
            self.conns.append(
                await asyncpg.connect(
                    user=u.username,
                    password=u.password,
                    host=u.host,
                    port=u.port,
                    database=u.database,
                )
            )

    async def calls(self, conn: Any, count: int) -> None:
        p = self.payload
        before = list(zip(*p.audit_before, strict=True))
        k, a, s, c, d = p.audit_after
        for _ in range(count):
            run_id, scope = ids()
            now = datetime.now(UTC).replace(tzinfo=None)
            await conn.execute(
                CREATE_UNIT,
                scope,
                "bench",
                run_id,
                "h" * 64,
                now,
                p.run_created,
                len(p.audit_before),
                *[list(column) for column in before],
            )
            await conn.execute(
                SETTLE_UNIT, run_id, 1, now, p.run_final, p.result, scope, k, a, s, c, d
            )

    async def rate(self, callers: int, count: int) -> float:
        await self.open(callers)
        per = max(count // callers, 1)
        start = time.perf_counter()
        await asyncio.gather(*(self.calls(conn, per) for conn in self.conns[:callers]))
        return per * callers / (time.perf_counter() - start)

    async def close(self) -> None:
        for conn in self.conns:
            await conn.close()


async def governed(callers: list[Caller], count: int) -> float:
    per = max(count // len(callers), 1)
    start = time.perf_counter()
    await asyncio.gather(*(caller.calls(per) for caller in callers))
    return per * len(callers) / (time.perf_counter() - start)


async def round_trips(store: SqlStore, caller: Caller) -> dict[str, float]:
    """What one governed call sends (averaged over 20 calls): round trips - writes to the
    server's socket, each answered before the next - and, of the SQLAlchemy-level ones,
    statements, BEGINs and COMMITs (the store may send statements straight to asyncpg, which
    SQLAlchemy's events do not see; its BEGIN and COMMIT are counted among the writes)."""
    seen = {"writes": 0, "statements": 0, "begin": 0, "commit": 0, "rollback": 0}

    def statement(*_args: Any) -> None:
        seen["statements"] += 1

    def counter(name: str) -> Any:
        def count(*_args: Any) -> None:
            seen[name] += 1

        return count

    engine = store.engine.sync_engine
    listeners = [("before_cursor_execute", statement)] + [
        (name, counter(name)) for name in ("begin", "commit", "rollback")
    ]
    for name, fn in listeners:
        event.listen(engine, name, fn)
    try:
        with socket_writes() as writes:
            await caller.calls(20)
    finally:
        for name, fn in listeners:
            event.remove(engine, name, fn)
    seen["writes"] = writes.count
    return {k: v / 20 for k, v in seen.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = server("POSTGRES")
    if base is None:
        raise SystemExit("set SIGNOFF_BENCH_POSTGRES_URL (or SIGNOFF_TEST_POSTGRES_URL)")
    columns: dict[str, list[float]] = {}
    async with Scratch(base) as url:
        store = await open_sql_store(url)
        assert isinstance(store, SqlStore)
        try:
            payload = await capture(store)
            floor = Floor(url, payload)
            runtime = runtime_on(store)
            one = Caller(runtime)
            many = [Caller(runtime) for _ in range(8)]
            await one.calls(100)
            await floor.rate(1, 100)
            trips = await round_trips(store, one)
            for _ in range(args.rounds):
                cpu = time.process_time()
                columns.setdefault("floor 1", []).append(await floor.rate(1, args.calls))
                cpu, spent = time.process_time(), time.process_time() - cpu
                columns.setdefault("floor cpu ms", []).append(spent / args.calls * 1e3)
                columns.setdefault("governed 1", []).append(await governed([one], args.calls))
                spent = time.process_time() - cpu
                columns.setdefault("governed cpu ms", []).append(spent / args.calls * 1e3)
                columns.setdefault("floor 8", []).append(await floor.rate(8, args.calls))
                columns.setdefault("governed 8", []).append(await governed(many, args.calls))
                print({k: round(v[-1], 2) for k, v in columns.items()}, flush=True)
            await floor.close()
        finally:
            await store.close()
    med = {k: statistics.median(v) for k, v in columns.items()}
    print(f"\nPostgreSQL; medians of {args.rounds} interleaved rounds of {args.calls} calls.\n")
    print(
        "| callers | asyncpg floor (one statement per unit) calls/s | governed calls/s | governed / floor |"
    )
    print("|---:|---:|---:|---:|")
    for n in (1, 8):
        f, g = med[f"floor {n}"], med[f"governed {n}"]
        print(f"| {n} | {f:,.0f} | {g:,.0f} | {g / f:.2f}x |")
    print(
        f"\nCPU of this process per call, one caller: floor {med['floor cpu ms']:.2f} ms, "
        f"governed {med['governed cpu ms']:.2f} ms (client side only; the server's is apart)."
    )
    print(
        f"One governed call: {trips['writes']:.0f} round trips (writes to the server; "
        f"floor: 2); SQLAlchemy saw {trips['statements']:.0f} statements, "
        f"{trips['begin']:.0f} begin, {trips['commit']:.0f} commit, "
        f"{trips['rollback']:.0f} rollback."
    )
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs "
        "(shared with other sessions: read the ratios)."
    )


if __name__ == "__main__":
    asyncio.run(main())
