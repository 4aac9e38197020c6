"""Reads at scale on SQLite: the approver's pending list, ``signoff_list_runs`` and ``get_run``
with 1,000,000 stored runs, with and without the ``(tenant_id, status, run_id)`` index.

Seeds the runs with one bulk insert (stdlib ``sqlite3``, one transaction, real run JSON from the
core model with fresh ids), then measures each read through the real code path (``pending_for``
of the inbox, ``RunQueries.list`` of the MCP tool, ``Runtime.get``) on a store opened normally.
The "without" column drops the index and measures the same reads again in the same run, then
puts it back. Prints ``EXPLAIN QUERY PLAN`` of each query and a table of p50 / p95 in ms.

    .venv/bin/python benchmarks/reads_at_scale.py [--runs 1000000] [--samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from signoff.core.clock import new_run_id  # noqa: E402
from signoff.core.codes import Code  # noqa: E402
from signoff.core.identity import Principal  # noqa: E402
from signoff.core.registry import ActionRegistry  # noqa: E402
from signoff.core.results import ExecutionResult  # noqa: E402
from signoff.core.run import ActionRun, ApprovalState, RunStatus  # noqa: E402
from signoff.core.runtime import Runtime  # noqa: E402
from signoff.core.short_ids import short_id  # noqa: E402
from signoff.store.sql import SqlStore, open_sql_store  # noqa: E402
from signoff.surfaces.access.caller import Caller  # noqa: E402
from signoff.surfaces.mcp.runs import RunQueries  # noqa: E402
from signoff.surfaces.web.views import pending_for  # noqa: E402

TENANTS = 1000
BUSY = "tenant-busy"  # 10 % of all runs, some of them waiting
IDLE = "tenant-idle"  # many runs, none waiting
INDEX = "ix_signoff_runs_tenant_status"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def template(status: RunStatus) -> ActionRun:
    result = None
    approval = None
    if status is RunStatus.SUCCEEDED:
        result = ExecutionResult.succeeded({"cancelled": True})
    elif status is RunStatus.DENIED:
        result = ExecutionResult.denied(Code.POLICY_DENIED, "Refused by policy.")
    else:
        approval = ApprovalState(
            approval_id="appr-1",
            approver_roles=("billing-lead",),
            count=1,
            requested_at=T0,
            expires_at=None,
        )
    return ActionRun(
        run_id="RUNID",
        tenant_id="TENANT",
        action_id="invoice.cancel",
        principal=Principal(id="agent-1", roles=("billing",)),
        channel="mcp",
        proposer_type="agent",
        status=status,
        input={"invoice_id": "INV-1", "amount": 10},
        result=result,
        approval=approval,
        created_at=T0,
        updated_at=T0,
    )


def seed(path: str, count: int) -> tuple[list[str], float]:
    """Bulk insert ``count`` runs; returns some run ids to read back and the seconds it took."""
    rng = random.Random(7)
    kinds = (RunStatus.SUCCEEDED, RunStatus.DENIED, RunStatus.WAITING_APPROVAL)
    texts = {s: template(s).model_dump_json() for s in kinds}
    done = [RunStatus.SUCCEEDED] * 19 + [RunStatus.DENIED]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # seeding only; the store itself keeps FULL
    start = time.perf_counter()
    sample: list[str] = []
    conn.execute("BEGIN")
    at = T0.replace(tzinfo=None).isoformat(sep=" ")
    batch: list[tuple[Any, ...]] = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.10:
            tenant = BUSY
        elif roll < 0.15:
            tenant = IDLE
        else:
            tenant = f"tenant-{rng.randrange(TENANTS)}"
        waiting = tenant != IDLE and rng.random() < 0.01
        status = RunStatus.WAITING_APPROVAL if waiting else rng.choice(done)
        run_id = new_run_id()
        data = texts[status].replace("RUNID", run_id, 1).replace("TENANT", tenant, 1)
        row = (run_id, tenant, "invoice.cancel", str(status), 1, "agent-1", None, at, at, data)
        batch.append(row)
        if i % 5000 == 0:
            sample.append(run_id)
        if len(batch) >= 20_000:
            conn.executemany("INSERT INTO signoff_runs VALUES (?,?,?,?,?,?,?,?,?,?)", batch)
            batch.clear()
    if batch:
        conn.executemany("INSERT INTO signoff_runs VALUES (?,?,?,?,?,?,?,?,?,?)", batch)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()
    return sample, time.perf_counter() - start


def plans(path: str) -> list[tuple[str, str]]:
    """``EXPLAIN QUERY PLAN`` of the statements the reads send (as SQLAlchemy renders them)."""
    queries = {
        "pending list (tenant + WAITING_APPROVAL)": (
            "SELECT run_id, data FROM signoff_runs WHERE tenant_id = ? AND status = ? "
            "ORDER BY run_id DESC LIMIT ?",
            (BUSY, "WAITING_APPROVAL", 200),
        ),
        "signoff_list_runs (tenant)": (
            "SELECT run_id, data FROM signoff_runs WHERE tenant_id = ? "
            "ORDER BY run_id DESC LIMIT ?",
            (BUSY, 20),
        ),
        "get_run (primary key)": (
            "SELECT data FROM signoff_runs WHERE run_id = ?",
            ("x",),
        ),
    }
    conn = sqlite3.connect(path)
    found = []
    for label, (sql, params) in queries.items():
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        found.append((label, "; ".join(str(row[-1]) for row in rows)))
    conn.close()
    return found


async def percentiles(work: Callable[[], Awaitable[Any]], samples: int) -> tuple[float, float]:
    for _ in range(5):
        await work()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


async def measure(store: SqlStore, ids: list[str], samples: int) -> dict[str, tuple[float, float]]:
    runtime = Runtime(ActionRegistry([]), store)
    queries = RunQueries(runtime)
    busy = Caller(Principal(id="lead-1", roles=("billing-lead",)), BUSY)
    idle = Caller(Principal(id="lead-1", roles=("billing-lead",)), IDLE)
    picks = iter(ids * (samples // len(ids) + 10))

    async def get_run() -> None:
        run_id = next(picks)
        async with store.unit() as unit:
            run = await unit.runs.get(run_id)
        assert run is not None
        assert await runtime.get(run_id, run.tenant_id) is not None

    async with store.unit() as unit:
        in_busy = [r for r in [await unit.runs.get(i) for i in ids] if r and r.tenant_id == BUSY]
    busy_picks = iter([r.run_id for r in in_busy] * (samples + 10))

    async def resolve_short() -> None:
        # A person's short id (the 12-character random tail) in the busiest tenant: no index
        # serves it, so this is the tenant's rows scanned.
        run_id = next(busy_picks)
        assert (await runtime.resolve_id(short_id(run_id), BUSY)).run_id == run_id

    return {
        "resolve a short id, busy tenant (Runtime.resolve_id)": await percentiles(
            resolve_short, samples
        ),
        "pending list, busy tenant (inbox pending_for)": await percentiles(
            lambda: pending_for(runtime, BUSY), samples
        ),
        "pending list, tenant with nothing pending": await percentiles(
            lambda: pending_for(runtime, IDLE), samples
        ),
        "signoff_list_runs, 20 newest": await percentiles(
            lambda: queries.list(busy, status=None, limit=20, before=None), samples
        ),
        "signoff_list_runs status=PENDING_APPROVAL": await percentiles(
            lambda: queries.list(busy, status="PENDING_APPROVAL", limit=20, before=None), samples
        ),
        "signoff_list_runs status=PENDING_APPROVAL, nothing pending": await percentiles(
            lambda: queries.list(idle, status="PENDING_APPROVAL", limit=20, before=None), samples
        ),
        "get_run": await percentiles(get_run, samples),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "scale.db")
        url = f"sqlite+aiosqlite:///{path}"
        store = await open_sql_store(url, upgrade=True)
        await store.close()
        ids, seconds = seed(path, args.runs)
        print(f"seeded {args.runs:,} runs in {seconds:.1f} s", flush=True)
        with_plans = plans(path)
        store = await open_sql_store(url)
        assert isinstance(store, SqlStore)
        try:
            with_index = await measure(store, ids, args.samples)
        finally:
            await store.close()
        conn = sqlite3.connect(path)
        conn.execute(f"DROP INDEX {INDEX}")
        conn.close()
        without_plans = plans(path)
        store = await open_sql_store(url)
        assert isinstance(store, SqlStore)
        try:
            without_index = await measure(store, ids, args.samples)
        finally:
            await store.close()

    print(f"\nEXPLAIN QUERY PLAN at {args.runs:,} runs, with {INDEX}:")
    for label, plan in with_plans:
        print(f"- {label}: {plan}")
    print(f"without it: {with_plans[0][0]}: {without_plans[0][1]}")
    print(
        f"\nSQLite, {args.runs:,} runs ({TENANTS:,} tenants + a busy and an idle one), "
        f"p50 / p95 of {args.samples} reads in ms, same run:\n"
    )
    print(f"| read | with {INDEX} | without it |")
    print("|---|---:|---:|")
    for label, (p50, p95) in with_index.items():
        old50, old95 = without_index[label]
        print(f"| {label} | {p50:.2f} / {p95:.2f} | {old50:.2f} / {old95:.2f} |")
    print(f"\n{os.cpu_count()} CPUs shared with other sessions; sqlite {sqlite3.sqlite_version}.")


if __name__ == "__main__":
    asyncio.run(main())
