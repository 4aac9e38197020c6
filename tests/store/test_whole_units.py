"""The store contract for whole units (``WholeUnits.run_unit``), over every backend (conftest).

A whole unit is what ``RunLedger`` hands the store for each write: the same guarantees as
``async with store.unit()``, whichever thread the store runs it on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from signoff.core.ports import (
    AuditEvent,
    DuplicateState,
    RunAlreadyExists,
    StoreUnit,
    WholeUnits,
)
from signoff.core.run import ActionRun, RunStatus
from tests.store.conftest import Backend
from tests.store.samples import T0, new_run, result, scope

WRITERS = 16


class Boom(Exception):
    pass


async def whole(backend: Backend) -> WholeUnits:
    store = await backend.open()
    assert isinstance(store, WholeUnits)
    return store


async def test_a_whole_unit_commits_everything_it_wrote_and_answers_its_value(
    backend: Backend, tenant: str
) -> None:
    store = await whole(backend)
    run, held = new_run(tenant), scope(tenant)
    trail = [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="proposed", at=T0)]

    async def body(unit: StoreUnit) -> ActionRun | None:
        reservation = await unit.duplicates.reserve(held, run.run_id, "h", T0)
        assert reservation.accepted
        await unit.runs.create(run)
        await unit.audit.append(trail)
        return await unit.runs.get(run.run_id)  # a unit reads its own writes

    assert await store.run_unit(body) == run
    async with (await backend.open()).unit() as unit:
        assert await unit.runs.get(run.run_id) == run
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.owner_run_id == run.run_id
        assert [e.kind for e in await unit.audit.list_for_run(run.run_id)] == ["proposed"]


async def test_a_whole_unit_that_raises_writes_nothing_and_its_error_reaches_the_caller(
    backend: Backend, tenant: str
) -> None:
    if not backend.durable:
        pytest.skip("memory units do not roll back (store/memory.py)")
    store = await whole(backend)
    run, held = new_run(tenant), scope(tenant)

    async def body(unit: StoreUnit) -> None:
        await unit.duplicates.reserve(held, run.run_id, "h", T0)
        await unit.runs.create(run)
        await unit.audit.append(
            [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="proposed", at=T0)]
        )
        raise Boom

    with pytest.raises(Boom):
        await store.run_unit(body)
    async with (await backend.open()).unit() as unit:
        assert await unit.runs.get(run.run_id) is None
        assert await unit.duplicates.get(held) is None
        assert await unit.audit.list_for_run(run.run_id) == []


async def test_a_whole_unit_meets_a_taken_run_id_and_changes_nothing(
    backend: Backend, tenant: str
) -> None:
    store = await whole(backend)
    first = new_run(tenant)
    async with (await backend.open()).unit() as unit:
        await unit.runs.create(first)
    held = scope(tenant)

    async def body(unit: StoreUnit) -> None:
        await unit.duplicates.reserve(held, "someone-else", "h", T0)
        await unit.runs.create(first.model_copy(update={"action_id": "other.action"}))
        await unit.audit.append(
            [AuditEvent(run_id=first.run_id, tenant_id=tenant, kind="proposed", at=T0)]
        )

    with pytest.raises(RunAlreadyExists):
        await store.run_unit(body)
    async with (await backend.open()).unit() as unit:
        assert await unit.runs.get(first.run_id) == first
        if backend.durable:
            assert await unit.duplicates.get(held) is None
            assert await unit.audit.list_for_run(first.run_id) == []


async def test_compare_and_set_then_complete_in_one_whole_unit_only_if_it_won(
    backend: Backend, tenant: str
) -> None:
    """``RunLedger.terminal``'s shape: sixteen concurrent whole units race one compare-and-set;
    exactly one wins, completes the reservation and appends its audit event."""
    store = await whole(backend)
    held = scope(tenant)
    run = new_run(tenant).model_copy(update={"status": RunStatus.RUNNING, "duplicate_scope": held})
    async with (await backend.open()).unit() as unit:
        assert (await unit.duplicates.reserve(held, run.run_id, "h", T0)).accepted
        await unit.runs.create(run)

    def body_for(index: int) -> Callable[[StoreUnit], Awaitable[ActionRun | None]]:
        final = run.advance(
            RunStatus.SUCCEEDED,
            T0 + timedelta(seconds=1),
            result=result({"writer": index}),
        )

        async def body(unit: StoreUnit) -> ActionRun | None:
            stored = await unit.runs.compare_and_set(run.version, final)
            if stored is None:
                return None
            assert stored.result is not None
            assert await unit.duplicates.complete(held, run.run_id, stored.result, T0)
            await unit.audit.append(
                [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind=f"won-{index}", at=T0)]
            )
            return stored

        return body

    outcomes = await asyncio.gather(*(store.run_unit(body_for(i)) for i in range(WRITERS)))
    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1
    winner = winners[0]
    assert winner.result is not None and winner.result.output is not None
    async with (await backend.open()).unit() as unit:
        assert await unit.runs.get(run.run_id) == winner
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.state is DuplicateState.COMPLETED
        assert entry.result == winner.result
        kinds = [e.kind for e in await unit.audit.list_for_run(run.run_id)]
    assert kinds == [f"won-{winner.result.output['writer']}"]
