"""Governed synchronous calls per second per store, next to raw writes of the same rows.

For each store (memory, SQLite file, PostgreSQL, MariaDB/MySQL):

- governed: ``Runtime.propose`` of a write action (JSON Schema input, resource CEL, a deny rule,
  no approval, idempotency key with resource scope, async no-op executor), one caller at a time:
  run + reservation + 5 audit events committed before the executor, result + completion + 1
  audit event after (two commits);
- raw: the same rows (same tables, same JSON payload sizes, same two transactions: 3 inserts /
  2 updates + 1 insert) written with hand-written SQL straight through the same driver
  (aiosqlite, asyncpg, aiomysql), no SQLAlchemy, no pipeline;
- memory: governed runs retained by a SQL store over ``--flat-runs`` runs (RSS sampled along the
  way) and the Python heap retained per run (tracemalloc over a window after warm-up).

PostgreSQL and MySQL come from ``SIGNOFF_BENCH_POSTGRES_URL`` / ``SIGNOFF_BENCH_MYSQL_URL``
(falling back to the ``SIGNOFF_TEST_*`` variables); the benchmark creates a scratch database
on each server and drops it afterwards.

    .venv/bin/python benchmarks/store_throughput.py [--calls 2000] [--rounds 3] [--flat-runs 100000]

Prints a table and writes it to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import NO_APPROVAL, definition, proposal  # noqa: E402

from signoff import ExecutionContext  # noqa: E402
from signoff.core.ports import Store  # noqa: E402
from signoff.core.registry import ActionRegistry  # noqa: E402
from signoff.core.run import RunStatus  # noqa: E402
from signoff.core.runtime import Runtime  # noqa: E402
from signoff.store.memory import InMemoryStore  # noqa: E402
from signoff.store.sql import SqlStore, open_sql_store, upgrade_database  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
NOTES = "## Notes"
TERMINAL = ("CANCELLED", "DENIED", "EXPIRED", "FAILED", "RUNTIME_FAILED", "SUCCEEDED")


async def noop(context: ExecutionContext) -> dict[str, Any]:
    return {}


def runtime_on(store: Store) -> Runtime:
    return Runtime(ActionRegistry([definition(noop, approval=NO_APPROVAL)]), store)


class Caller:
    """Distinct keys and invoices for every call, so each one is a new governed operation."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.prefix = secrets.token_hex(4)
        self.n = 0

    async def call(self) -> None:
        self.n += 1
        outcome = await self.runtime.propose(
            proposal(
                {"invoice_id": f"INV-{self.n}", "amount": 10},
                key=f"{self.prefix}-{self.n}",
                tenant="bench",
            )
        )
        assert outcome.code == "SUCCEEDED", outcome

    async def calls(self, count: int) -> float:
        """Calls per second over ``count`` sequential calls."""
        start = time.perf_counter()
        for _ in range(count):
            await self.call()
        return count / (time.perf_counter() - start)


# ------------------------------------------------------------------------------- raw baselines
@dataclass
class Payload:
    """One governed call's rows, captured from a real run, replayed with fresh ids."""

    run_created: str
    run_final: str
    result: str
    audit_before: list[tuple[str, str | None, str | None, str | None, str | None]]
    audit_after: tuple[str, str | None, str | None, str | None, str | None]


async def capture(store: SqlStore) -> Payload:
    caller = Caller(runtime_on(store))
    await caller.call()
    async with store.unit() as unit:
        (run,) = await unit.runs.list(tenant_id="bench", limit=1)
        events = await unit.audit.list_for_run(run.run_id)
    assert run.result is not None
    created = run.model_copy(update={"status": RunStatus.RUNNING, "result": None, "version": 1})
    rows = [
        (e.kind, e.actor, e.status, e.code, None if e.data is None else str(e.data)) for e in events
    ]
    return Payload(
        run_created=created.model_dump_json(),
        run_final=run.model_dump_json(),
        result=run.result.model_dump_json(),
        audit_before=rows[:-1],
        audit_after=rows[-1],
    )


def ids() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_hex(32)


async def raw_sqlite(path: str, payload: Payload, count: int) -> float:
    import aiosqlite

    conn = await aiosqlite.connect(path)
    await conn.execute("PRAGMA busy_timeout = 10000")
    await conn.execute("PRAGMA journal_mode = WAL")
    await conn.execute("PRAGMA synchronous = FULL")
    not_terminal = ",".join(f"'{s}'" for s in TERMINAL)
    try:
        start = time.perf_counter()
        for _ in range(count):
            run_id, scope = ids()
            now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
            await conn.execute(
                "INSERT INTO signoff_duplicates (scope_hash, tenant_id, action_id, "
                "idempotency_key, visibility, owner_run_id, state, input_hash, result, "
                "created_at, completed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (scope_hash) DO NOTHING",
                (
                    scope,
                    "bench",
                    "invoice.cancel",
                    run_id,
                    "resource:x",
                    run_id,
                    "RUNNING",
                    "h" * 64,
                    None,
                    now,
                    None,
                ),
            )
            await conn.execute(
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
                    payload.run_created,
                ),
            )
            await conn.executemany(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (?,?,?,?,?,?,?,?)",
                [(run_id, "bench", k, now, a, s, c, d) for k, a, s, c, d in payload.audit_before],
            )
            await conn.commit()
            await conn.execute(
                "UPDATE signoff_runs SET status=?, version=? + 1, updated_at=?, data=? "
                f"WHERE run_id=? AND version=? AND status NOT IN ({not_terminal})",
                ("SUCCEEDED", 1, now, payload.run_final, run_id, 1),
            )
            await conn.execute(
                "UPDATE signoff_duplicates SET state='COMPLETED', result=?, completed_at=? "
                "WHERE scope_hash=? AND owner_run_id=? AND state='RUNNING'",
                (payload.result, now, scope, run_id),
            )
            k, a, s, c, d = payload.audit_after
            await conn.execute(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (?,?,?,?,?,?,?,?)",
                (run_id, "bench", k, now, a, s, c, d),
            )
            await conn.commit()
        return count / (time.perf_counter() - start)
    finally:
        await conn.close()


async def raw_postgres(url: str, payload: Payload, count: int) -> float:
    import asyncpg

    u = make_url(url)
    conn = await asyncpg.connect(
        user=u.username, password=u.password, host=u.host, port=u.port, database=u.database
    )
    not_terminal = ",".join(f"'{s}'" for s in TERMINAL)
    try:
        start = time.perf_counter()
        for _ in range(count):
            run_id, scope = ids()
            now = datetime.now(UTC).replace(tzinfo=None)
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO signoff_duplicates (scope_hash, tenant_id, action_id, "
                    "idempotency_key, visibility, owner_run_id, state, input_hash, result, "
                    "created_at, completed_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) "
                    "ON CONFLICT (scope_hash) DO NOTHING",
                    scope,
                    "bench",
                    "invoice.cancel",
                    run_id,
                    "resource:x",
                    run_id,
                    "RUNNING",
                    "h" * 64,
                    None,
                    now,
                    None,
                )
                await conn.execute(
                    "INSERT INTO signoff_runs (run_id, tenant_id, action_id, status, version, "
                    "principal_id, idempotency_key, created_at, updated_at, data) "
                    "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (run_id) DO NOTHING",
                    run_id,
                    "bench",
                    "invoice.cancel",
                    "RUNNING",
                    1,
                    "agent-1",
                    run_id,
                    now,
                    now,
                    payload.run_created,
                )
                await conn.executemany(
                    "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, "
                    "status, code, data) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
                    [
                        (run_id, "bench", k, now, a, s, c, d)
                        for k, a, s, c, d in payload.audit_before
                    ],
                )
            async with conn.transaction():
                await conn.execute(
                    "UPDATE signoff_runs SET status=$1, version=$2::int + 1, updated_at=$3, "
                    f"data=$4 WHERE run_id=$5 AND version=$2 AND status NOT IN ({not_terminal})",
                    "SUCCEEDED",
                    1,
                    now,
                    payload.run_final,
                    run_id,
                )
                await conn.execute(
                    "UPDATE signoff_duplicates SET state='COMPLETED', result=$1, completed_at=$2 "
                    "WHERE scope_hash=$3 AND owner_run_id=$4 AND state='RUNNING'",
                    payload.result,
                    now,
                    scope,
                    run_id,
                )
                k, a, s, c, d = payload.audit_after
                await conn.execute(
                    "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, "
                    "status, code, data) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
                    run_id,
                    "bench",
                    k,
                    now,
                    a,
                    s,
                    c,
                    d,
                )
        return count / (time.perf_counter() - start)
    finally:
        await conn.close()


async def raw_mysql(url: str, payload: Payload, count: int) -> float:
    import aiomysql

    u = make_url(url)
    conn = await aiomysql.connect(
        user=u.username or "root",
        password=u.password or "",
        host=u.host or "127.0.0.1",
        port=u.port or 3306,
        db=u.database,
        charset="utf8mb4",
        autocommit=False,
    )
    not_terminal = ",".join(f"'{s}'" for s in TERMINAL)
    try:
        cur = await conn.cursor()
        await cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        start = time.perf_counter()
        for _ in range(count):
            run_id, scope = ids()
            now = datetime.now(UTC).replace(tzinfo=None)
            await cur.execute(
                "INSERT INTO signoff_duplicates (scope_hash, tenant_id, action_id, "
                "idempotency_key, visibility, owner_run_id, state, input_hash, result, "
                "created_at, completed_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (
                    scope,
                    "bench",
                    "invoice.cancel",
                    run_id,
                    "resource:x",
                    run_id,
                    "RUNNING",
                    "h" * 64,
                    None,
                    now,
                    None,
                ),
            )
            await cur.execute(
                "INSERT INTO signoff_runs (run_id, tenant_id, action_id, status, version, "
                "principal_id, idempotency_key, created_at, updated_at, data) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
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
                    payload.run_created,
                ),
            )
            await cur.executemany(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                [(run_id, "bench", k, now, a, s, c, d) for k, a, s, c, d in payload.audit_before],
            )
            await conn.commit()
            await cur.execute(
                "UPDATE signoff_runs SET status=%s, version=%s + 1, updated_at=%s, data=%s "
                f"WHERE run_id=%s AND version=%s AND status NOT IN ({not_terminal})",
                ("SUCCEEDED", 1, now, payload.run_final, run_id, 1),
            )
            await cur.execute(
                "UPDATE signoff_duplicates SET state='COMPLETED', result=%s, completed_at=%s "
                "WHERE scope_hash=%s AND owner_run_id=%s AND state='RUNNING'",
                (payload.result, now, scope, run_id),
            )
            k, a, s, c, d = payload.audit_after
            await cur.execute(
                "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, "
                "code, data) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                (run_id, "bench", k, now, a, s, c, d),
            )
            await conn.commit()
        await cur.close()
        return count / (time.perf_counter() - start)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------ harness
@dataclass
class Result:
    store: str
    governed: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)

    @property
    def governed_median(self) -> float:
        return statistics.median(self.governed)

    @property
    def raw_median(self) -> float | None:
        return statistics.median(self.raw) if self.raw else None


async def interleave(
    result: Result,
    governed: Callable[[], Awaitable[float]],
    raw: Callable[[], Awaitable[float]] | None,
    rounds: int,
) -> Result:
    """Alternate governed and raw rounds so machine noise hits both alike."""
    for _ in range(rounds):
        result.governed.append(await governed())
        if raw is not None:
            result.raw.append(await raw())
    return result


async def bench_memory(calls: int, rounds: int) -> Result:
    caller = Caller(runtime_on(InMemoryStore()))
    await caller.calls(200)  # warm-up: imports, compiled expressions, caches
    return await interleave(Result("memory"), lambda: caller.calls(calls), None, rounds)


async def bench_sql(name: str, url: str, calls: int, rounds: int) -> Result:
    store = await open_sql_store(url, upgrade=True)
    try:
        payload = await capture(store)
        caller = Caller(runtime_on(store))
        await caller.calls(100)
        backend = make_url(url).get_backend_name()
        raw: Callable[[], Awaitable[float]]
        if backend == "sqlite":
            path = make_url(url).database
            assert path is not None
            raw = lambda: raw_sqlite(path, payload, calls)  # noqa: E731
        elif backend == "postgresql":
            raw = lambda: raw_postgres(url, payload, calls)  # noqa: E731
        else:
            raw = lambda: raw_mysql(url, payload, calls)  # noqa: E731
        await raw()  # warm-up
        return await interleave(Result(name), lambda: caller.calls(calls), raw, rounds)
    finally:
        await store.close()


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Flatness:
    store: str
    runs: int
    rss_mib: list[tuple[int, float]]
    heap_kib: float
    heap_window: int
    seconds: float


async def flat_memory(name: str, url: str, runs: int, concurrency: int = 8) -> Flatness:
    """Run ``runs`` governed calls through one runtime on a SQL store; sample RSS and heap."""
    store = await open_sql_store(url, upgrade=True)
    try:
        callers = [Caller(runtime_on(store)) for _ in range(concurrency)]
        per = max(runs // concurrency // 10, 1)

        async def chunk() -> None:
            await asyncio.gather(*(c.calls(per) for c in callers))

        start = time.perf_counter()
        await chunk()  # warm-up chunk: caches, pools, statement caches fill here
        samples: list[tuple[int, float]] = []
        done = per * concurrency
        for _ in range(9):
            await chunk()
            done += per * concurrency
            gc.collect()
            samples.append((done, rss_bytes() / 2**20))
        seconds = time.perf_counter() - start
        # The Python heap still held after a further window of runs (tracemalloc, after gc).
        window = 5000
        tracemalloc.start()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        await asyncio.gather(*(c.calls(window // concurrency) for c in callers))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return Flatness(name, done, samples, (after - before) / 1024, window, seconds)
    finally:
        await store.close()


# ------------------------------------------------------------------------------ scratch DBs
class Scratch:
    """A scratch database on a server, created for the run and dropped afterwards."""

    def __init__(self, base: str) -> None:
        self.admin = make_url(base)
        self.name = f"signoff_bench_{os.getpid()}_{secrets.token_hex(3)}"
        self.url = self.admin.set(database=self.name).render_as_string(hide_password=False)

    async def _admin(self, statement: str) -> None:
        engine = create_async_engine(self.admin, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    async def __aenter__(self) -> str:
        await self._admin(f"CREATE DATABASE {self.name}")
        await upgrade_database(self.url)
        return self.url

    async def __aexit__(self, *exc: object) -> None:
        force = " WITH (FORCE)" if self.admin.get_backend_name() == "postgresql" else ""
        await self._admin(f"DROP DATABASE {self.name}{force}")


def server(kind: str) -> str | None:
    return os.environ.get(f"SIGNOFF_BENCH_{kind}_URL") or os.environ.get(f"SIGNOFF_TEST_{kind}_URL")


# ----------------------------------------------------------------------------------- output
def table(results: list[Result], flat: list[Flatness], args: argparse.Namespace) -> str:
    lines = [
        f"Governed synchronous calls per second, one caller, median of {args.rounds} rounds of "
        f"{args.calls} calls (raw: the same rows and transactions through the same driver).",
        "",
        "| store | governed calls/s | raw calls/s | governed / raw |",
        "|---|---:|---:|---:|",
    ]
    for r in results:
        raw = r.raw_median
        ratio = f"{r.governed_median / raw:.2f}x" if raw else "—"
        lines.append(
            f"| {r.store} | {r.governed_median:,.0f} | {f'{raw:,.0f}' if raw else '—'} | {ratio} |"
        )
    if flat:
        lines += [
            "",
            "Memory over many governed runs on a SQL store (8 concurrent callers, one process):",
            "",
            "| store | runs | RSS after warm-up | RSS at the end | growth | "
            "Python heap kept over the next runs (tracemalloc) | runs/s (8 callers) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for f in flat:
            (first_at, first), (last_at, last) = f.rss_mib[0], f.rss_mib[-1]
            lines.append(
                f"| {f.store} | {f.runs:,} | {first:.1f} MiB ({first_at:,} runs) | "
                f"{last:.1f} MiB ({last_at:,} runs) | {last - first:+.1f} MiB | "
                f"{f.heap_kib:+.0f} KiB over {f.heap_window:,} | {f.runs / f.seconds:,.0f} |"
            )
    lines += [
        "",
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}.",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flat-runs", type=int, default=100_000)
    parser.add_argument(
        "--stores", default="memory,sqlite,postgres,mysql", help="comma-separated subset"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    wanted = args.stores.split(",")

    results: list[Result] = []
    flat: list[Flatness] = []
    if "memory" in wanted:
        results.append(await bench_memory(args.calls * 5, args.rounds))
        print(f"memory: {results[-1].governed_median:,.0f} calls/s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" in wanted:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            results.append(await bench_sql("sqlite (file, WAL)", url, args.calls, args.rounds))
            print(results[-1], flush=True)
            if args.flat_runs:
                flat_url = f"sqlite+aiosqlite:///{Path(tmp) / 'flat.db'}"
                flat.append(await flat_memory("sqlite", flat_url, args.flat_runs))
                print(flat[-1], flush=True)
    for kind, label in (("postgres", "postgresql"), ("mysql", "mariadb")):
        base = server(kind.upper())
        if kind not in wanted:
            continue
        if base is None:
            print(f"{label}: skipped (set SIGNOFF_BENCH_{kind.upper()}_URL)", flush=True)
            continue
        async with Scratch(base) as url:
            results.append(await bench_sql(label, url, args.calls, args.rounds))
            print(results[-1], flush=True)
            if args.flat_runs and kind == "postgres":
                flat.append(await flat_memory(label, url, args.flat_runs))
                print(flat[-1], flush=True)

    text = table(results, flat, args)
    print()
    print(text)
    if not args.no_write:
        # Hand-written analysis below a "## Notes" heading survives a re-run.
        old = RESULTS.read_text() if RESULTS.exists() else ""
        notes = old[old.index(NOTES) :] if NOTES in old else ""
        RESULTS.write_text(
            "# Store throughput (`benchmarks/store_throughput.py`)\n\n"
            + text
            + "\n"
            + ("\n" + notes if notes else "")
        )


if __name__ == "__main__":
    asyncio.run(main())
