"""What only the durable stores promise: atomic units, restarts, other store instances."""

from __future__ import annotations

import asyncio

import pytest

from signoff.core.clock import ManualClock
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.ports import AuditEvent, Store
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from tests.helpers import NO_APPROVAL, SMALL, Recorder, definition, proposal
from tests.store.conftest import Backend
from tests.store.samples import T0, new_run, result, scope


class Boom(Exception):
    pass


def runtime(store: Store, recorder: Recorder) -> Runtime:
    return Runtime(
        ActionRegistry([definition(recorder, approval=NO_APPROVAL)]), store, clock=ManualClock()
    )


async def test_a_unit_that_raises_writes_nothing(sql_backend: Backend, tenant: str) -> None:
    store = await sql_backend.open()
    run, s = new_run(tenant), scope(tenant)
    with pytest.raises(Boom):
        async with store.unit() as unit:
            assert (await unit.duplicates.reserve(s, run.run_id, "h", T0)).accepted
            await unit.runs.create(run)
            await unit.audit.append(
                [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="proposed", at=T0)]
            )
            raise Boom
    async with store.unit() as unit:
        assert await unit.runs.get(run.run_id) is None
        assert await unit.duplicates.get(s) is None
        assert await unit.audit.list_for_run(run.run_id) == []


async def test_the_first_terminal_result_survives_a_restart(
    sql_backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    before = await sql_backend.open()
    first = await runtime(before, recorder).propose(proposal(SMALL, tenant=tenant))
    assert first.status is ExecutionStatus.SUCCEEDED
    await before.close()

    after = await sql_backend.open()
    restarted = runtime(after, recorder)
    replay = await restarted.propose(proposal(SMALL, tenant=tenant))
    assert recorder.count == 1
    assert (replay.status, replay.code, replay.output) == (first.status, first.code, first.output)
    assert replay.duplicate_of == first.run_id
    assert await restarted.get(first.run_id, tenant) == first
    stored = await restarted.get_run(first.run_id, tenant)
    assert stored is not None and stored.status is RunStatus.SUCCEEDED
    async with after.unit() as unit:
        # A terminal run refuses every later write, after a restart too.
        assert await unit.runs.compare_and_set(stored.version, stored) is None


async def test_a_duplicate_with_other_input_is_refused_after_a_restart(
    sql_backend: Backend, tenant: str
) -> None:
    recorder = Recorder()
    before = await sql_backend.open()
    await runtime(before, recorder).propose(proposal(SMALL, tenant=tenant))
    await before.close()
    after = await sql_backend.open()
    other = await runtime(after, recorder).propose(proposal({**SMALL, "amount": 11}, tenant=tenant))
    assert other.code == Code.IDEMPOTENCY_KEY_REUSED
    assert recorder.count == 1


async def test_a_reservation_and_its_result_survive_a_restart(
    sql_backend: Backend, tenant: str
) -> None:
    s = scope(tenant)
    store = await sql_backend.open()
    async with store.unit() as unit:
        await unit.duplicates.reserve(s, "run-a", "h", T0)
        await unit.duplicates.complete(s, "run-a", result({"kept": 1}), T0)
    await store.close()
    reopened = await sql_backend.open()
    async with reopened.unit() as unit:
        again = await unit.duplicates.reserve(s, "run-b", "h", T0)
    assert not again.accepted
    assert again.existing is not None and again.existing.result == result({"kept": 1})


async def test_wait_for_change_sees_a_commit_made_through_another_store(
    sql_backend: Backend, tenant: str
) -> None:
    """Another store object stands in for another process: only polling can see its commit."""
    waiter = await sql_backend.open(poll_interval=0.02)
    writer = await sql_backend.open()
    run = new_run(tenant)
    async with writer.unit() as unit:
        await unit.runs.create(run)
    waiting = asyncio.create_task(waiter.wait_for_change(run.run_id, 1, timeout=30))
    async with writer.unit() as unit:
        await unit.runs.compare_and_set(1, run.advance(RunStatus.VALIDATING, T0))
    await asyncio.wait_for(waiting, timeout=10)


async def test_many_concurrent_governed_calls_all_complete(
    sql_backend: Backend, tenant: str
) -> None:
    """SQLite has one writer at a time: concurrent units queue for it instead of failing."""
    recorder = Recorder()
    rt = runtime(await sql_backend.open(), recorder)
    outcomes = await asyncio.gather(
        *(
            rt.propose(
                proposal({"invoice_id": f"INV-{i}", "amount": 1}, key=f"k{i}", tenant=tenant)
            )
            for i in range(32)
        )
    )
    assert {o.code for o in outcomes} == {Code.SUCCEEDED}
    assert recorder.count == 32
