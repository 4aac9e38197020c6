"""Policy replay over a large stored history on SQLite (or PostgreSQL): wall time, runs/s and
peak memory, against the same process before the replay.

A template history is recorded by the real ``Runtime`` from ``tests/replay/history.py``'s
manifest (a call that runs at once, one that waits and is approved, one refused by a deny rule,
one over the spend limit); its stored runs and audit events are then copied ``--runs`` times in
bulk (stdlib ``sqlite3``, one transaction; fresh run ids, 100 principals, 10 s apart, the trail
in time order) into a scratch database — in a child process, so the seeding's memory is not
this process's. This process then opens the history read-only, measures its resident memory
(the baseline) and replays the whole history against a changed manifest (the approval threshold
lowered: every call that ran at once now needs approval), then prints the replay's figures with
its peak resident memory (``ru_maxrss``) over the baseline.

    .venv/bin/python benchmarks/replay_history.py [--runs 1000000]

(SQLite only: the paging is the same ``SqlHistory`` code on PostgreSQL, which
``tests/replay/test_replay.py`` runs over both.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.helpers import proposal  # noqa: E402
from tests.replay import history as recorded  # noqa: E402

from signoff import Principal  # noqa: E402
from signoff.core.clock import ManualClock, new_run_id  # noqa: E402
from signoff.core.replay import ReplayReport, ReplayScope, replay  # noqa: E402
from signoff.core.run import ActionRun, ApprovalVote  # noqa: E402
from signoff.core.runtime import DecisionRequest, Runtime  # noqa: E402
from signoff.store.history import open_history  # noqa: E402
from signoff.store.sql import open_sql_store  # noqa: E402

TENANT = "acme"
PRINCIPALS = 100
STEP = timedelta(seconds=10)
START = datetime(2026, 1, 1, tzinfo=UTC)


def rss_kib() -> int:
    """Resident memory now (KiB), from ``/proc/self/statm``."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() // 1024


async def template(url: str, directory: Path) -> None:
    """Four runs by the real runtime: runs, waits then approved, refused, over the limit."""
    store = await open_sql_store(url)
    clock = ManualClock(START)
    registry = recorded.registry(recorded.manifests(directory))
    runtime = Runtime(registry, store, clock=clock, instance_id="bench")
    agent = Principal(id="agent-0", roles=("billing",))
    try:
        for n, amount in enumerate((100, 5000, 200000, 19000), start=1):
            data = {"invoice_id": f"INV-{n}", "amount": amount}
            out = await runtime.propose(proposal(data, f"k-{n}", agent, TENANT, "invoice.pay"))
            clock.advance(timedelta(seconds=1))
            if amount == 5000:
                lead = Principal(id="lead-1", roles=("billing-lead",))
                request = DecisionRequest(approver=lead, vote=ApprovalVote.APPROVE, reason="ok")
                await runtime.decide(out.run_id, TENANT, request)
                clock.advance(timedelta(seconds=1))
    finally:
        await runtime.drain()
        await store.close()


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def seed_sqlite(path: str, count: int) -> float:
    """Copy the template's runs and events ``count`` times (in runs); returns the seconds."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # seeding only
    runs = conn.execute("SELECT * FROM signoff_runs ORDER BY created_at").fetchall()
    events = conn.execute(
        "SELECT run_id, tenant_id, kind, at, actor, status, code, data FROM signoff_audit_events"
        " ORDER BY seq"
    ).fetchall()
    models = {row[0]: ActionRun.model_validate_json(row[9]) for row in runs}
    t0 = min(m.created_at for m in models.values())
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.execute("DELETE FROM signoff_audit_events")
    conn.execute("DELETE FROM signoff_runs")
    run_rows: list[tuple[Any, ...]] = []
    event_rows: list[tuple[Any, ...]] = []
    rounds = -(-count // len(models))
    made = 0
    for k in range(rounds):
        shift = STEP * len(models) * k
        principal = Principal(id=f"agent-{k % PRINCIPALS}", roles=("billing",))
        ids: dict[str, str] = {}
        for old, model in models.items():
            if made == count:
                break
            made += 1
            new = ids[old] = new_run_id()
            moved = model.model_copy(
                update={
                    "run_id": new,
                    "principal": principal,
                    "created_at": model.created_at - t0 + START + shift,
                    "updated_at": model.updated_at - t0 + START + shift,
                }
            )
            at = _stamp(moved.created_at)
            run_rows.append(
                (new, TENANT, moved.action_id, str(moved.status), moved.version, principal.id,
                 f"{moved.idempotency_key}-{k}", at, _stamp(moved.updated_at),
                 moved.model_dump_json())
            )  # fmt: skip
        for run_id, tenant, kind, at, actor, status, code, data in events:
            if run_id not in ids:
                continue
            moment = datetime.fromisoformat(at).replace(tzinfo=UTC) - t0 + START + shift
            event_rows.append(
                (ids[run_id], tenant, kind, _stamp(moment), actor, status, code, data)
            )
        if len(run_rows) >= 20_000:
            _flush(conn, run_rows, event_rows)
    _flush(conn, run_rows, event_rows)
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - started


def _flush(conn: sqlite3.Connection, runs: list[Any], events: list[Any]) -> None:
    conn.executemany("INSERT INTO signoff_runs VALUES (?,?,?,?,?,?,?,?,?,?)", runs)
    conn.executemany(
        "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, actor, status, code, "
        "data) VALUES (?,?,?,?,?,?,?,?)",
        events,
    )
    runs.clear()
    events.clear()


def prepare(url: str, count: int, scratch: str) -> float:
    """In a child process: record the template, then copy it (returns the seconds seeding)."""
    asyncio.run(template(url, Path(scratch) / "ran-under"))
    return seed_sqlite(url.split(":///", 1)[1], count)


async def measure(url: str, scratch: Path) -> dict[str, Any]:
    changed = recorded.registry(recorded.manifests(scratch / "changed", recorded.APPROVAL_LOWERED))
    history = await open_history(url)
    try:
        await history.events(0, 1)  # connections and statements warm
        baseline = rss_kib()
        started = time.perf_counter()
        report = await replay(history, changed, ReplayScope(), ReplayReport())
        wall = time.perf_counter() - started
    finally:
        await history.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    record = report.record()
    return {
        "runs": report.replayed,
        "changed": report.changed,
        "wall": wall,
        "baseline": baseline,
        "peak": peak,
        "kinds": record["totals"]["by_kind"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite+aiosqlite:///{scratch}/history.db"
        context = multiprocessing.get_context("spawn")
        with context.Pool(1) as pool:
            seeded = pool.apply(prepare, (url, args.runs, scratch))
        size = Path(scratch, "history.db").stat().st_size / 2**20
        found = asyncio.run(measure(url, Path(scratch)))
    mib = 1024
    print(f"seeded {args.runs:,} runs in {seeded:.1f} s (database {size:,.0f} MiB)")
    print(f"changed manifest: approval threshold lowered; changes {json.dumps(found['kinds'])}")
    print()
    print(
        "| store | runs replayed | changed | wall (s) | runs/s | RSS before (MiB) | peak RSS (MiB) | peak - before (MiB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| SQLite | {found['runs']:,} | {found['changed']:,} | {found['wall']:.1f} | "
        f"{found['runs'] / found['wall']:,.0f} | {found['baseline'] / mib:.0f} | "
        f"{found['peak'] / mib:.0f} | {(found['peak'] - found['baseline']) / mib:.0f} |"
    )


if __name__ == "__main__":
    main()
