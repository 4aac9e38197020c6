"""The audit chain under concurrent writers: one unforked chain per tenant, on every store."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from signoff.core.chain import GENESIS, recomputed_hash
from signoff.core.ports import AuditEvent, Store
from signoff.store.sql import SqlStore
from tests.store.conftest import Backend
from tests.store.samples import new_run

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 40
DEADLINE = 60.0


async def chain_of(store: Store, tenant: str) -> list[AuditEvent]:
    events: list[AuditEvent] = []
    while True:
        async with store.unit() as unit:
            page = await unit.audit.scan(
                after_seq=(events[-1].seq or 0) if events else 0, limit=500, tenant_id=tenant
            )
        events.extend(page)
        if len(page) < 500:
            return events


def assert_one_unforked_chain(events: list[AuditEvent], length: int) -> None:
    assert [e.chain_seq for e in events] == list(range(1, length + 1))
    prev = GENESIS
    for e in events:
        assert e.prev_hash == prev, f"fork at #{e.chain_seq}"
        assert e.hash == recomputed_hash(e)
        prev = e.hash or ""


def pair(tenant: str, run_id: str) -> list[AuditEvent]:
    now = datetime.now(UTC)
    return [
        AuditEvent(run_id=run_id, tenant_id=tenant, kind="proposed", at=now),
        AuditEvent(run_id=run_id, tenant_id=tenant, kind="refused", at=now, data={"n": 1}),
    ]


async def test_concurrent_writers_of_one_tenant_append_one_unforked_chain(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    # SQLite queues writers of one process on a lock at their first write, so there the barrier
    # sits before the unit; elsewhere every writer holds an open transaction with a write in it
    # and all reach the chain head together.
    in_transaction = isinstance(store, SqlStore) and store.dialect != "sqlite"
    barrier = asyncio.Barrier(WRITERS)

    async def write(n: int) -> None:
        if not in_transaction:
            await barrier.wait()
        async with store.unit() as unit:
            if in_transaction:
                await unit.runs.create(new_run(tenant))
                await barrier.wait()
            await unit.audit.append(pair(tenant, f"run-{n}"))

    await asyncio.wait_for(asyncio.gather(*(write(n) for n in range(WRITERS))), DEADLINE)
    events = await chain_of(store, tenant)
    assert_one_unforked_chain(events, 2 * WRITERS)
    async with store.unit() as unit:
        heads = {h.tenant_id: h for h in await unit.audit.heads()}
    assert heads[tenant].chain_seq == 2 * WRITERS
    assert heads[tenant].hash == events[-1].hash


async def test_tenants_have_separate_chains_even_in_one_unit(backend: Backend, tenant: str) -> None:
    store = await backend.open()
    other = f"{tenant}-b"
    async with store.unit() as unit:
        await unit.audit.append([*pair(other, "r1"), *pair(tenant, "r2"), *pair(other, "r3")])
    assert_one_unforked_chain(await chain_of(store, tenant), 2)
    others = await chain_of(store, other)
    assert_one_unforked_chain(others, 4)
    assert [e.run_id for e in others] == ["r1", "r1", "r3", "r3"]


async def test_a_rolled_back_unit_leaves_the_chain_head_where_it_was(
    sql_backend: Backend, tenant: str
) -> None:
    store = await sql_backend.open()
    async with store.unit() as unit:
        await unit.audit.append(pair(tenant, "kept"))
    with pytest.raises(RuntimeError):
        async with store.unit() as unit:
            await unit.audit.append(pair(tenant, "lost"))
            raise RuntimeError("abort the unit")
    async with store.unit() as unit:
        await unit.audit.append(pair(tenant, "after"))
    events = await chain_of(store, tenant)
    assert_one_unforked_chain(events, 4)
    assert [e.run_id for e in events] == ["kept", "kept", "after", "after"]


@pytest.mark.slow
async def test_two_processes_with_many_writers_each_append_one_unforked_chain(
    sql_backend: Backend, tenant: str
) -> None:
    url = sql_backend.url
    assert url is not None
    store = await sql_backend.open()
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.audit_worker",
            url,
            tenant,
            str(WRITERS // 2),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]

    async def line(process: asyncio.subprocess.Process) -> str:
        assert process.stdout is not None
        return (await asyncio.wait_for(process.stdout.readline(), DEADLINE)).decode().strip()

    try:
        assert [await line(w) for w in workers] == ["ready", "ready"]
        for w in workers:
            assert w.stdin is not None
            w.stdin.write(b"go\n")
            await w.stdin.drain()
        assert [await line(w) for w in workers] == ["done", "done"]
        assert [await asyncio.wait_for(w.wait(), DEADLINE) for w in workers] == [0, 0]
    finally:
        for w in workers:
            if w.returncode is None:
                w.kill()
                await w.wait()
    events = await chain_of(store, tenant)
    assert_one_unforked_chain(events, 2 * WRITERS)
    assert {e.run_id.split("-")[1] for e in events} == {str(w.pid) for w in workers}
