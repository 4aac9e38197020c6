"""SQLite: governed synchronous calls against the stdlib-``sqlite3`` floor, one and many callers.

In the same run, interleaved round by round so machine noise hits every column alike:

- floor: stdlib ``sqlite3`` on the event loop's own thread doing the same two transactions a
  governed call makes (3 inserts + 5 audit rows, commit; 2 updates + 1 audit row, commit), same
  tables, same payload sizes, ``synchronous=FULL`` — no pipeline, no thread, no SQLAlchemy;
- before: the governed call with the store's writer switched off, so every statement goes through
  SQLAlchemy + aiosqlite as it did before the writer existed (one caller only: without the writer
  nothing queues concurrent writers in-process);
- governed: ``Runtime.propose`` through ``SqlStore`` (one writer thread, group commit), one caller
  and 8 / 32 concurrent callers on one runtime.

    .venv/bin/python benchmarks/sqlite_writer.py [--calls 1000] [--rounds 3]

Prints a table (medians of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store_throughput import TERMINAL, Caller, Payload, capture, ids, runtime_on  # noqa: E402

from signoff.store.sql import SqlStore, open_sql_store  # noqa: E402


def floor_sqlite(path: str, payload: Payload, count: int) -> float:
    """The same two transactions per call, inline, with the stdlib driver."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    not_terminal = ",".join(f"'{s}'" for s in TERMINAL)
    try:
        start = time.perf_counter()
        for _ in range(count):
            run_id, scope = ids()
            now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
            run = (payload.run_created,)
            dup = ("h" * 64, None, now, None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO signoff_duplicates (scope_hash, tenant_id, action_id, "
                "idempotency_key, visibility, owner_run_id, state, input_hash, result, "
                "created_at, completed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (scope_hash) DO NOTHING",
                (scope, "bench", "invoice.cancel", run_id, "resource:x", run_id, "RUNNING", *dup),
            )
            conn.execute(
                "INSERT INTO signoff_runs (run_id, tenant_id, action_id, status, version, "
                "principal_id, idempotency_key, created_at, updated_at, data) "
                "VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (run_id) DO NOTHING",
                (
                    run_id,
                    "bench",
                    "invoice.cancel",
                    "RUNNING",
                    1,
                    "agent-1",
                    run_id,
                    now,
                    now,
                    *run,
                ),
            )
            conn.executemany(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (?,?,?,?,?,?,?,?)",
                [(run_id, "bench", k, now, a, s, c, d) for k, a, s, c, d in payload.audit_before],
            )
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE signoff_runs SET status=?, version=? + 1, updated_at=?, data=? "
                f"WHERE run_id=? AND version=? AND status NOT IN ({not_terminal})",
                ("SUCCEEDED", 1, now, payload.run_final, run_id, 1),
            )
            conn.execute(
                "UPDATE signoff_duplicates SET state='COMPLETED', result=?, completed_at=? "
                "WHERE scope_hash=? AND owner_run_id=? AND state='RUNNING'",
                (payload.result, now, scope, run_id),
            )
            k, a, s, c, d = payload.audit_after
            conn.execute(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (?,?,?,?,?,?,?,?)",
                (run_id, "bench", k, now, a, s, c, d),
            )
            conn.execute("COMMIT")
        return count / (time.perf_counter() - start)
    finally:
        conn.close()


async def concurrent(callers: list[Caller], count: int) -> float:
    """Calls per second with ``len(callers)`` callers sharing ``count`` calls."""
    per = max(count // len(callers), 1)
    start = time.perf_counter()
    await asyncio.gather(*(caller.calls(per) for caller in callers))
    return per * len(callers) / (time.perf_counter() - start)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    columns: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        store = await open_sql_store(f"sqlite+aiosqlite:///{path}", upgrade=True)
        before = await open_sql_store(f"sqlite+aiosqlite:///{path}", upgrade=False)
        assert isinstance(before, SqlStore)
        before.writer = None  # every statement through SQLAlchemy + aiosqlite, as before
        try:
            payload = await capture(store)
            runtime = runtime_on(store)
            one = Caller(runtime)
            old = Caller(runtime_on(before))
            many = {n: [Caller(runtime) for _ in range(n)] for n in (8, 32)}
            await one.calls(100)
            await old.calls(100)
            floor_sqlite(path, payload, 100)
            for _ in range(args.rounds):
                columns.setdefault("floor", []).append(floor_sqlite(path, payload, args.calls))
                columns.setdefault("before", []).append(await old.calls(args.calls // 2))
                columns.setdefault("1", []).append(await one.calls(args.calls))
                for n, callers in many.items():
                    columns.setdefault(str(n), []).append(await concurrent(callers, args.calls))
                print({k: round(v[-1]) for k, v in columns.items()}, flush=True)
        finally:
            await before.close()
            await store.close()
    med = {k: statistics.median(v) for k, v in columns.items()}
    floor, old_one = med["floor"], med["before"]
    rows = [
        ("stdlib sqlite3 floor, same two transactions inline", med["floor"]),
        ("before: governed, every statement via SQLAlchemy + aiosqlite", med["before"]),
        ("governed, 1 caller (writer thread)", med["1"]),
        ("governed, 8 concurrent callers (group commit)", med["8"]),
        ("governed, 32 concurrent callers (group commit)", med["32"]),
    ]
    print()
    print(
        f"SQLite, synchronous=FULL, WAL; medians of {args.rounds} interleaved rounds of "
        f"{args.calls} calls.\n"
    )
    print("| figure | calls/s | / floor | / before (1 caller) |")
    print("|---|---:|---:|---:|")
    for label, value in rows:
        print(f"| {label} | {value:,.0f} | {value / floor:.2f}x | {value / old_one:.2f}x |")
    print(
        f"\nPython {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs (shared with other sessions: read the ratios)."
    )


if __name__ == "__main__":
    asyncio.run(main())
