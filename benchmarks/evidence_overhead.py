"""What the evidence features cost per governed call: chained audit appends and limit checks.

For each store (SQLite file, PostgreSQL; MariaDB when ``SIGNOFF_BENCH_MYSQL_URL`` or
``SIGNOFF_TEST_MYSQL_URL`` is set), one caller proposes synchronous governed calls of a write
action (no approval) through ``Runtime.propose`` in three configurations, interleaved round by
round so drift hits all of them alike:

- ``plain``: audit events appended as before the chain (one INSERT, no head row, no hashes) and
  no ``spec.limits``: the baseline;
- ``chained``: the real tamper-evident append (head-row upsert, hashes, head update);
- ``chained + limit``: the same plus one cumulative limit (count and CEL sum over a 24 h window
  per principal, never reached), so every call locks the limit's counter row, reads its window
  and holds a reservation in the same unit of work.

    .venv/bin/python benchmarks/evidence_overhead.py [--calls 1000] [--rounds 3]

Prints a table: calls per second, milliseconds per call, and the time added per call relative to
``plain`` (the aim is under 15 %).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_throughput import Scratch, server  # noqa: E402
from tests.helpers import NO_APPROVAL, definition, proposal  # noqa: E402

from signoff import ExecutionContext  # noqa: E402
from signoff.core.limits import LimitSpec  # noqa: E402
from signoff.core.ports import AuditEvent  # noqa: E402
from signoff.core.registry import ActionRegistry  # noqa: E402
from signoff.core.runtime import Runtime  # noqa: E402
from signoff.store.sql import SqlStore, open_sql_store  # noqa: E402
from signoff.store.sql.audit import SqlAuditLog  # noqa: E402
from signoff.store.sql.codec import audit_values  # noqa: E402

LIMIT = LimitSpec(
    name="bench", window=timedelta(hours=24), count=10**9, sum="input.amount", max=1e15
)


async def noop(context: ExecutionContext) -> dict[str, Any]:
    return {}


@contextmanager
def unchained_audit() -> Any:
    """The append of before the chain: one multi-row INSERT, nothing else."""
    chained = SqlAuditLog.append

    async def plain(self: SqlAuditLog, events: Sequence[AuditEvent]) -> None:
        if events:
            unit = self._unit
            await unit.write(unit.sql.insert_audit, [audit_values(e) for e in events])

    SqlAuditLog.append = plain  # type: ignore[method-assign]
    try:
        yield
    finally:
        SqlAuditLog.append = chained  # type: ignore[method-assign]


@dataclass(frozen=True)
class Mode:
    name: str
    limits: tuple[LimitSpec, ...]
    patch: Callable[[], AbstractContextManager[Any]]


MODES = (
    Mode("plain", (), unchained_audit),
    Mode("chained", (), nullcontext),
    Mode("chained + limit", (LIMIT,), nullcontext),
)


async def calls_per_second(store: SqlStore, mode: Mode, count: int) -> float:
    action = definition(noop, approval=NO_APPROVAL, limits=mode.limits)
    runtime = Runtime(ActionRegistry([action]), store)
    prefix = secrets.token_hex(4)
    with mode.patch():
        for n in range(20):  # warm the pool and the statement caches
            await runtime.propose(
                proposal({"invoice_id": f"INV-{n}", "amount": 1}, f"w{prefix}{n}")
            )
        start = time.perf_counter()
        for n in range(count):
            outcome = await runtime.propose(
                proposal({"invoice_id": f"INV-{n}", "amount": 1}, key=f"{prefix}-{n}")
            )
            assert outcome.code == "SUCCEEDED", outcome
        elapsed = time.perf_counter() - start
    await runtime.drain()
    return count / elapsed


async def measure(label: str, url: str, calls: int, rounds: int) -> list[tuple[str, str, float]]:
    store = await open_sql_store(url)
    try:
        samples: dict[str, list[float]] = {m.name: [] for m in MODES}
        for _ in range(rounds):
            for mode in MODES:
                samples[mode.name].append(await calls_per_second(store, mode, calls))
        return [(label, m.name, statistics.median(samples[m.name])) for m in MODES]
    finally:
        await store.close()


def table(rows: list[tuple[str, str, float]]) -> str:
    lines = [
        "| store | configuration | calls/s | ms/call | added per call vs plain |",
        "|---|---|---:|---:|---:|",
    ]
    base: dict[str, float] = {}
    for store, mode, rate in rows:
        ms = 1000 / rate
        if mode == "plain":
            base[store] = ms
            added = "—"
        else:
            added = f"{(ms / base[store] - 1) * 100:+.1f} %"
        lines.append(f"| {store} | {mode} | {rate:,.0f} | {ms:.2f} | {added} |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += await measure(
            "SQLite", f"sqlite+aiosqlite:///{tmp}/bench.db", args.calls, args.rounds
        )
    for label, kind in (("PostgreSQL", "POSTGRES"), ("MariaDB", "MYSQL")):
        base = server(kind)
        if base is None:
            print(f"{label}: skipped (set SIGNOFF_BENCH_{kind}_URL)", flush=True)
            continue
        async with Scratch(base) as url:
            rows += await measure(label, url, args.calls, args.rounds)
    print(table(rows))


if __name__ == "__main__":
    asyncio.run(main())
