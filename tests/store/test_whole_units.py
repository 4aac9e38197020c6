"""The store contract for whole units (``WholeUnits.run_unit``), settling a run
(``SettlingUnit.settle``) and creating a reserved one (``ReservingUnit.create_reserved``, through
``RunLedger.create``), or the same calls one by one where a unit lacks them, on every backend.

A whole unit is what ``RunLedger`` hands the store for each write: the same guarantees as
``async with store.unit()``, whichever thread the store runs it on.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest

from signoff.core.chain import GENESIS, recomputed_hash
from signoff.core.ledger import RunLedger, settle
from signoff.core.ports import (
    AuditEvent,
    DuplicateEntry,
    DuplicateState,
    RunAlreadyExists,
    Settlement,
    SettlingUnit,
    Store,
    StoreUnit,
    WholeUnits,
)
from signoff.core.run import ActionRun, DuplicateScope, RunStatus
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


# ------------------------------------------------------------------------- settle (terminal)
async def settled(
    store: Store, expected: int, run: ActionRun, then: Settlement
) -> ActionRun | None:
    async with store.unit() as unit:
        if isinstance(unit, SettlingUnit):
            return await unit.settle(expected, run, then)
        return await settle(unit, expected, run, then)


async def running_with_holds(backend: Backend, tenant: str) -> tuple[ActionRun, DuplicateScope]:
    held = scope(tenant)
    run = new_run(tenant).model_copy(update={"status": RunStatus.RUNNING, "duplicate_scope": held})
    async with (await backend.open()).unit() as unit:
        assert (await unit.duplicates.reserve(held, run.run_id, "h", T0)).accepted
        await unit.limits.hold(f"{tenant}/spend", tenant, run.run_id, 5.0, T0)
        await unit.runs.create(run)
        await unit.audit.append(
            [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="dispatching", at=T0)]
        )
    return run, held


def settlement(held: DuplicateScope, kind: str = "executed") -> Settlement:
    def events(stored: ActionRun) -> list[AuditEvent]:
        return [
            AuditEvent(
                run_id=stored.run_id,
                tenant_id=stored.tenant_id,
                kind=kind,
                at=T0,
                status=str(stored.status),
                data={"version": stored.version},
            )
        ]

    return Settlement(at=T0, events=events, complete=(held, result()), release_limits=True)


async def test_settle_writes_the_run_completes_releases_and_audits_on_the_chain(
    backend: Backend, tenant: str
) -> None:
    run, held = await running_with_holds(backend, tenant)
    store = await backend.open()
    final = run.advance(RunStatus.SUCCEEDED, T0 + timedelta(seconds=1), result=result())
    stored = await settled(store, run.version, final, settlement(held))
    assert stored is not None and stored.version == run.version + 1
    async with store.unit() as unit:
        assert await unit.runs.get(run.run_id) == stored
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.state is DuplicateState.COMPLETED
        assert entry.result == result()
        assert await unit.limits.usage(f"{tenant}/spend", T0 - timedelta(days=1)) == []
        # The next append links after the settled event: the chain has no gap and no fork.
        await unit.audit.append(
            [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="later", at=T0)]
        )
    async with store.unit() as unit:
        trail = await unit.audit.list_for_run(run.run_id)
        heads = {h.tenant_id: h for h in await unit.audit.heads()}
    assert [e.kind for e in trail] == ["dispatching", "executed", "later"]
    assert trail[1].data == {"version": stored.version}
    assert [e.chain_seq for e in trail] == [1, 2, 3]
    prev = GENESIS
    for e in trail:
        assert e.prev_hash == prev and recomputed_hash(e) == e.hash
        prev = e.hash or ""
    assert heads[tenant].chain_seq == 3 and heads[tenant].hash == trail[-1].hash


async def test_a_lost_settle_writes_nothing(backend: Backend, tenant: str) -> None:
    run, held = await running_with_holds(backend, tenant)
    store = await backend.open()
    final = run.advance(RunStatus.SUCCEEDED, T0, result=result())
    assert await settled(store, run.version + 1, final, settlement(held)) is None
    async with store.unit() as unit:
        assert await unit.runs.get(run.run_id) == run
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.state is DuplicateState.RUNNING
        assert len(await unit.limits.usage(f"{tenant}/spend", T0 - timedelta(days=1))) == 1
        assert [e.kind for e in await unit.audit.list_for_run(run.run_id)] == ["dispatching"]
        heads = {h.tenant_id: h for h in await unit.audit.heads()}
    assert heads[tenant].chain_seq == 1


async def test_sixteen_concurrent_settles_one_wins_and_the_chain_stays_linear(
    backend: Backend, tenant: str
) -> None:
    run, held = await running_with_holds(backend, tenant)
    store = await backend.open()
    final = run.advance(RunStatus.SUCCEEDED, T0, result=result())
    outcomes = await asyncio.gather(
        *(settled(store, run.version, final, settlement(held, f"won-{i}")) for i in range(WRITERS))
    )
    assert len([o for o in outcomes if o is not None]) == 1
    async with store.unit() as unit:
        trail = await unit.audit.list_for_run(run.run_id)
    assert len(trail) == 2 and trail[1].kind.startswith("won-")
    assert [e.chain_seq for e in trail] == [1, 2] and trail[1].prev_hash == trail[0].hash


# ------------------------------------------------------------------ create reserved (propose)
class FixedClock:
    def now(self) -> datetime:
        return T0


def answered_duplicate(
    run: ActionRun,
) -> Callable[[DuplicateEntry], tuple[ActionRun, list[AuditEvent]]]:
    def on_duplicate(existing: DuplicateEntry) -> tuple[ActionRun, list[AuditEvent]]:
        held = result({"holder": existing.owner_run_id})
        answer = run.model_copy(update={"status": RunStatus.FAILED, "result": held})
        return answer, [AuditEvent(run_id=run.run_id, tenant_id=run.tenant_id, kind="dup", at=T0)]

    return on_duplicate


def proposed(run: ActionRun) -> list[AuditEvent]:
    return [
        AuditEvent(run_id=run.run_id, tenant_id=run.tenant_id, kind=kind, at=T0)
        for kind in ("proposed", "validated", "dispatching")
    ]


async def chain_of(store: Store, tenant: str) -> list[int | None]:
    async with store.unit() as unit:
        return [e.chain_seq for e in await unit.audit.scan(tenant_id=tenant)]


async def test_create_reserved_writes_the_reservation_the_run_and_its_chained_audit(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    ledger = RunLedger(store, FixedClock())
    run, held = new_run(tenant), scope(tenant)
    recorded = await ledger.create(
        run, proposed(run), scope=held, on_duplicate=answered_duplicate(run)
    )
    assert recorded == run
    async with store.unit() as unit:
        assert await unit.runs.get(run.run_id) == run
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.owner_run_id == run.run_id
        trail = await unit.audit.list_for_run(run.run_id)
    assert [e.kind for e in trail] == ["proposed", "validated", "dispatching"]
    assert [e.chain_seq for e in trail] == [1, 2, 3]
    assert trail[0].prev_hash == GENESIS and trail[2].prev_hash == trail[1].hash
    assert all(recomputed_hash(e) == e.hash for e in trail)


async def test_create_reserved_on_a_held_scope_records_the_duplicate_answer(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    ledger = RunLedger(store, FixedClock())
    held = scope(tenant)
    first = new_run(tenant)
    await ledger.create(first, proposed(first), scope=held, on_duplicate=answered_duplicate(first))
    second = new_run(tenant)
    recorded = await ledger.create(
        second, proposed(second), scope=held, on_duplicate=answered_duplicate(second)
    )
    assert recorded.status is RunStatus.FAILED and recorded.result is not None
    assert recorded.result.output == {"holder": first.run_id}
    async with store.unit() as unit:
        assert await unit.runs.get(second.run_id) == recorded
        entry = await unit.duplicates.get(held)
        assert entry is not None and entry.owner_run_id == first.run_id
        assert [e.kind for e in await unit.audit.list_for_run(second.run_id)] == ["dup"]
    assert await chain_of(store, tenant) == [1, 2, 3, 4]


@pytest.mark.parametrize("known_head", [False, True], ids=["new-tenant", "known-head"])
async def test_create_reserved_with_a_taken_run_id_raises_and_writes_nothing(
    backend: Backend, tenant: str, known_head: bool
) -> None:
    """Also after a create, when the store knows the tenant's chain head (PostgreSQL then
    writes the whole unit as one statement after it): nothing is written, and the next create
    links after the committed head."""
    store = await backend.open()
    ledger = RunLedger(store, FixedClock())
    if known_head:
        first = new_run(tenant)
        await ledger.create(first, proposed(first), scope=scope(tenant), on_duplicate=None)
    before = await chain_of(store, tenant)
    taken = new_run(tenant)
    async with store.unit() as unit:
        await unit.runs.create(taken)
    held = scope(tenant)
    again = taken.model_copy(update={"action_id": "other.action"})
    with pytest.raises(RunAlreadyExists):
        await ledger.create(
            again, proposed(again), scope=held, on_duplicate=answered_duplicate(again)
        )
    async with store.unit() as unit:
        assert await unit.runs.get(taken.run_id) == taken
        if backend.durable:
            assert await unit.duplicates.get(held) is None
            assert await unit.audit.list_for_run(taken.run_id) == []
    if not backend.durable:
        return
    assert await chain_of(store, tenant) == before
    later = new_run(tenant)
    await ledger.create(later, proposed(later), scope=scope(tenant), on_duplicate=None)
    async with store.unit() as unit:
        trail = await unit.audit.scan(tenant_id=tenant)
    assert [e.chain_seq for e in trail] == list(range(1, len(before) + 4))
    assert all(e.prev_hash == p.hash for p, e in itertools.pairwise(trail))
    assert all(recomputed_hash(e) == e.hash for e in trail)


async def test_sixteen_concurrent_creates_of_one_scope_one_owner_and_one_linear_chain(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    ledger = RunLedger(store, FixedClock())
    held = scope(tenant)
    runs = [new_run(tenant) for _ in range(WRITERS)]
    recorded = await asyncio.gather(
        *(
            ledger.create(run, proposed(run), scope=held, on_duplicate=answered_duplicate(run))
            for run in runs
        )
    )
    owners = [r for r in recorded if r.status is not RunStatus.FAILED]
    assert len(owners) == 1
    assert await chain_of(store, tenant) == list(range(1, 3 + WRITERS))
