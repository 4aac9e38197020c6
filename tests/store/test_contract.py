"""The store contract, one suite over memory, SQLite, PostgreSQL and MariaDB (see conftest)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from signoff.core.chain import GENESIS, recomputed_hash
from signoff.core.ports import AuditEvent, DuplicateState, RunAlreadyExists, Store
from signoff.core.run import ActionRun, DuplicateScope, RunStatus
from tests.store.conftest import Backend
from tests.store.samples import T0, full_run, new_run, result, scope

WRITERS = 16


async def stored(backend: Backend, run: ActionRun) -> ActionRun:
    store = await backend.open()
    async with store.unit() as unit:
        await unit.runs.create(run)
    return run


async def load(backend: Backend, run_id: str) -> ActionRun | None:
    store = await backend.open()
    async with store.unit() as unit:
        return await unit.runs.get(run_id)


# ---------------------------------------------------------------------------------------- runs
async def test_every_field_of_a_run_round_trips(backend: Backend, tenant: str) -> None:
    run = full_run(tenant)
    unset = [
        name
        for name, info in ActionRun.model_fields.items()
        if getattr(run, name) == info.get_default(call_default_factory=True)
    ]
    assert unset == [], "the sample must set every field, or this test proves nothing"
    await stored(backend, run)
    assert await load(backend, run.run_id) == run


async def test_create_refuses_an_existing_run_id_and_keeps_the_first(
    backend: Backend, tenant: str
) -> None:
    first = await stored(backend, new_run(tenant))
    store = await backend.open()
    with pytest.raises(RunAlreadyExists):
        async with store.unit() as unit:
            await unit.runs.create(first.model_copy(update={"action_id": "other.action"}))
    assert await load(backend, first.run_id) == first


async def test_an_unknown_run_id_reads_as_none(backend: Backend) -> None:
    assert await load(backend, "00000000-0000-7000-8000-000000000000") is None


async def test_compare_and_set_writes_the_next_version(backend: Backend, tenant: str) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    moved = run.advance(RunStatus.VALIDATING, T0 + timedelta(seconds=1))
    async with store.unit() as unit:
        written = await unit.runs.compare_and_set(1, moved)
    assert written is not None
    assert written.version == 2
    assert written.status is RunStatus.VALIDATING
    assert await load(backend, run.run_id) == written


async def test_compare_and_set_from_a_stale_version_changes_nothing(
    backend: Backend, tenant: str
) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    async with store.unit() as unit:
        assert await unit.runs.compare_and_set(1, run.advance(RunStatus.VALIDATING, T0))
        stale = run.advance(RunStatus.CANCELLED, T0)
        assert await unit.runs.compare_and_set(1, stale) is None
        assert await unit.runs.compare_and_set(7, stale) is None
    current = await load(backend, run.run_id)
    assert current is not None
    assert (current.status, current.version) == (RunStatus.VALIDATING, 2)


async def test_compare_and_set_on_a_missing_run_writes_nothing(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    ghost = new_run(tenant)
    async with store.unit() as unit:
        assert await unit.runs.compare_and_set(1, ghost) is None
    assert await load(backend, ghost.run_id) is None


async def test_a_terminal_run_never_changes_again(backend: Backend, tenant: str) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    async with store.unit() as unit:
        done = await unit.runs.compare_and_set(1, run.advance(RunStatus.DENIED, T0))
    assert done is not None and done.is_terminal
    async with store.unit() as unit:
        # Even a writer holding the right version cannot move a terminal run.
        assert await unit.runs.compare_and_set(2, done.model_copy(update={"attempt": 9})) is None
    assert await load(backend, run.run_id) == done


async def test_sixteen_concurrent_compare_and_set_writers_exactly_one_wins(
    backend: Backend, tenant: str
) -> None:
    run = await stored(backend, new_run(tenant))
    barrier = asyncio.Barrier(WRITERS)
    stores = [await backend.open() for _ in range(WRITERS)]

    async def writer(index: int) -> ActionRun | None:
        async with stores[index].unit() as unit:
            await unit.runs.get(run.run_id)  # connection checked out, transaction open
            await barrier.wait()
            attempt = run.advance(RunStatus.VALIDATING, T0, attempt=index)
            return await unit.runs.compare_and_set(1, attempt)

    results = await asyncio.gather(*(writer(i) for i in range(WRITERS)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    current = await load(backend, run.run_id)
    assert current == winners[0]
    assert current is not None and current.version == 2


async def test_list_is_newest_first_within_a_tenant_and_filters_by_status(
    backend: Backend, tenant: str
) -> None:
    runs = [await stored(backend, new_run(tenant)) for _ in range(5)]
    other = await stored(backend, new_run(tenant + "-other"))
    store = await backend.open()
    async with store.unit() as unit:
        await unit.runs.compare_and_set(1, runs[1].advance(RunStatus.DENIED, T0))
        listed = await unit.runs.list(tenant_id=tenant)
        denied = await unit.runs.list(tenant_id=tenant, statuses=[RunStatus.DENIED])
        page = await unit.runs.list(tenant_id=tenant, limit=2, before_run_id=runs[3].run_id)
        everyone = await unit.runs.list(limit=1000)
    newest_first = [r.run_id for r in reversed(runs)]
    assert [r.run_id for r in listed] == newest_first
    assert [r.run_id for r in denied] == [runs[1].run_id]
    assert [r.run_id for r in page] == [runs[2].run_id, runs[1].run_id]
    assert {r.run_id for r in runs} | {other.run_id} <= {r.run_id for r in everyone}


async def test_list_pages_oldest_first_after_a_cursor(backend: Backend, tenant: str) -> None:
    runs = [await stored(backend, new_run(tenant)) for _ in range(5)]
    store = await backend.open()
    async with store.unit() as unit:
        first = await unit.runs.list(tenant_id=tenant, limit=2, oldest_first=True)
        second = await unit.runs.list(
            tenant_id=tenant, limit=2, oldest_first=True, after_run_id=first[-1].run_id
        )
        rest = await unit.runs.list(
            tenant_id=tenant, limit=10, oldest_first=True, after_run_id=second[-1].run_id
        )
        between = await unit.runs.list(
            tenant_id=tenant, after_run_id=runs[0].run_id, before_run_id=runs[3].run_id
        )
    ids = [r.run_id for r in runs]
    assert [r.run_id for r in first + second + rest] == ids
    assert [r.run_id for r in between] == [ids[2], ids[1]]


async def test_a_tenant_id_matches_exactly(backend: Backend, tenant: str) -> None:
    await stored(backend, new_run(tenant))
    store = await backend.open()
    async with store.unit() as unit:
        assert await unit.runs.list(tenant_id=tenant.upper()) == []
        assert await unit.runs.list(tenant_id=tenant + " ") == []


# ---------------------------------------------------------------------------------- duplicates
async def test_a_reservation_and_its_completion_round_trip(backend: Backend, tenant: str) -> None:
    store = await backend.open()
    s = scope(tenant)
    async with store.unit() as unit:
        reservation = await unit.duplicates.reserve(s, "run-a", "hash-a", T0)
        assert reservation.accepted
        entry = await unit.duplicates.get(s)
    assert entry is not None
    assert (entry.scope, entry.owner_run_id, entry.state) == (s, "run-a", DuplicateState.RUNNING)
    assert (entry.input_hash, entry.result, entry.created_at) == ("hash-a", None, T0)
    assert entry.completed_at is None

    done_at = T0 + timedelta(seconds=3)
    async with store.unit() as unit:
        assert await unit.duplicates.complete(s, "run-a", result({"n": 1.5}), done_at)
        again = await unit.duplicates.reserve(s, "run-b", "hash-a", done_at)
    assert not again.accepted
    assert again.existing is not None
    assert again.existing.state is DuplicateState.COMPLETED
    assert again.existing.result == result({"n": 1.5})
    assert (again.existing.owner_run_id, again.existing.completed_at) == ("run-a", done_at)


async def test_only_the_owner_completes_or_releases_and_only_while_running(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    s = scope(tenant)
    async with store.unit() as unit:
        assert (await unit.duplicates.reserve(s, "run-a", "h", T0)).accepted
        assert not await unit.duplicates.complete(s, "run-x", result(), T0)
        assert not await unit.duplicates.release(s, "run-x")
        assert await unit.duplicates.complete(s, "run-a", result(), T0)
        # The first terminal result is kept: no second completion, no release after it.
        assert not await unit.duplicates.complete(s, "run-a", result({"second": True}), T0)
        assert not await unit.duplicates.release(s, "run-a")
        entry = await unit.duplicates.get(s)
    assert entry is not None and entry.result == result()


async def test_sixteen_concurrent_reserves_accept_one_and_reject_fifteen(
    backend: Backend, tenant: str
) -> None:
    s = scope(tenant)
    barrier = asyncio.Barrier(WRITERS)
    stores = [await backend.open() for _ in range(WRITERS)]

    async def reserver(index: int) -> tuple[bool, str | None]:
        async with stores[index].unit() as unit:
            await unit.duplicates.get(s)  # connection checked out, transaction open
            await barrier.wait()
            reservation = await unit.duplicates.reserve(s, f"run-{index}", "h", T0)
        owner = reservation.existing.owner_run_id if reservation.existing else None
        return reservation.accepted, owner

    results = await asyncio.gather(*(reserver(i) for i in range(WRITERS)))
    accepted = [i for i, (ok, _) in enumerate(results) if ok]
    assert len(accepted) == 1
    assert [owner for ok, owner in results if not ok] == [f"run-{accepted[0]}"] * 15


async def test_a_stale_owner_racing_a_new_reserve_never_touches_the_new_reservation(
    backend: Backend, tenant: str
) -> None:
    """ABA: A reserves and releases; A (now stale) races B's fresh reserve, many times over."""
    stores = [await backend.open() for _ in range(3)]
    for round_ in range(20):
        await _aba_round(stores, scope(tenant, f"aba-{round_}"), round_)


async def _aba_round(stores: list[Store], s: DuplicateScope, round_: int) -> None:
    a, b = f"run-a-{round_}", f"run-b-{round_}"
    async with stores[0].unit() as unit:
        assert (await unit.duplicates.reserve(s, a, "h", T0)).accepted
    async with stores[0].unit() as unit:
        assert await unit.duplicates.release(s, a)
    barrier = asyncio.Barrier(3)

    async def fresh_reserve() -> bool:
        async with stores[1].unit() as unit:
            await unit.duplicates.get(s)  # connection checked out, transaction open
            await barrier.wait()
            return (await unit.duplicates.reserve(s, b, "h", T0)).accepted

    async def stale_release() -> bool:
        async with stores[2].unit() as unit:
            await unit.duplicates.get(s)
            await barrier.wait()
            return await unit.duplicates.release(s, a)

    async def stale_complete() -> bool:
        async with stores[0].unit() as unit:
            await unit.duplicates.get(s)
            await barrier.wait()
            return await unit.duplicates.complete(s, a, result({"stale": True}), T0)

    outcomes = await asyncio.gather(fresh_reserve(), stale_release(), stale_complete())
    assert list(outcomes) == [True, False, False]
    async with stores[0].unit() as unit:
        entry = await unit.duplicates.get(s)
    assert entry is not None
    assert (entry.owner_run_id, entry.state, entry.result) == (b, DuplicateState.RUNNING, None)


async def test_an_old_running_reservation_is_never_taken_over(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    s = scope(tenant)
    a_year_later = T0 + timedelta(days=365)
    async with store.unit() as unit:
        assert (await unit.duplicates.reserve(s, "run-old", "h", T0)).accepted
    async with store.unit() as unit:
        late = await unit.duplicates.reserve(s, "run-new", "h", a_year_later)
        await unit.duplicates.purge_completed(a_year_later)
        entry = await unit.duplicates.get(s)
    assert not late.accepted
    assert late.existing is not None and late.existing.owner_run_id == "run-old"
    assert entry is not None
    assert (entry.owner_run_id, entry.state) == ("run-old", DuplicateState.RUNNING)


async def test_purge_removes_only_completed_entries_older_than_the_cutoff(
    backend: Backend, tenant: str
) -> None:
    # An era no other test writes in, so the exact count holds on a shared database.
    era = T0.replace(year=1990)
    store = await backend.open()
    running_old, completed_old, completed_new = scope(tenant), scope(tenant), scope(tenant)
    async with store.unit() as unit:
        for i, s in enumerate((running_old, completed_old, completed_new)):
            assert (await unit.duplicates.reserve(s, f"run-{i}", "h", era)).accepted
        assert await unit.duplicates.complete(completed_old, "run-1", result(), era)
        assert await unit.duplicates.complete(
            completed_new, "run-2", result(), era + timedelta(hours=25)
        )
    async with store.unit() as unit:
        purged = await unit.duplicates.purge_completed(era + timedelta(hours=24))
        left = [await unit.duplicates.get(s) for s in (running_old, completed_old, completed_new)]
    assert purged == 1
    assert [e.owner_run_id if e else None for e in left] == ["run-0", None, "run-2"]


# --------------------------------------------------------------------------------------- audit
async def test_audit_events_round_trip_in_append_order(backend: Backend, tenant: str) -> None:
    store = await backend.open()
    run_id = f"run-of-{tenant}"
    events = [
        AuditEvent(run_id=run_id, tenant_id=tenant, kind="proposed", at=T0),
        AuditEvent(
            run_id=run_id,
            tenant_id=tenant,
            kind="executed",
            at=T0 + timedelta(microseconds=7),
            actor="agent-ü",
            status="SUCCEEDED",
            code="SUCCEEDED",
            data={"roles": ["a", "b"], "n": 1.5, "none": None, "nested": {"ok": True}},
        ),
    ]
    async with store.unit() as unit:
        await unit.audit.append(events[:1])
        await unit.audit.append(events[1:])
        await unit.audit.append([])
    async with store.unit() as unit:
        listed = await unit.audit.list_for_run(run_id)
    assert [replace(e, seq=None, chain_seq=None, prev_hash=None, hash=None) for e in listed] == (
        events
    )
    assert [e.chain_seq for e in listed] == [1, 2]
    assert [e.prev_hash for e in listed] == [GENESIS, listed[0].hash]
    assert all(e.hash == recomputed_hash(e) for e in listed)
    seqs = [e.seq or 0 for e in listed]
    assert 0 not in seqs and seqs == sorted(seqs)


# -------------------------------------------------------------------------------------- waiting
async def test_wait_for_change_returns_when_this_process_commits_a_new_version(
    backend: Backend, tenant: str
) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    waiting = asyncio.create_task(store.wait_for_change(run.run_id, 1, timeout=30))
    for _ in range(20):  # let the waiter run: with nothing committed it must keep waiting
        await asyncio.sleep(0)
    assert not waiting.done(), "wait_for_change returned before anything changed"
    async with store.unit() as unit:
        await unit.runs.compare_and_set(1, run.advance(RunStatus.VALIDATING, T0))
    await asyncio.wait_for(waiting, timeout=10)


async def test_wait_for_change_returns_at_once_when_the_version_already_moved(
    backend: Backend, tenant: str
) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    async with store.unit() as unit:
        await unit.runs.compare_and_set(1, run.advance(RunStatus.VALIDATING, T0))
    await asyncio.wait_for(store.wait_for_change(run.run_id, 1, timeout=30), timeout=10)


async def test_wait_for_change_gives_up_at_its_timeout(backend: Backend, tenant: str) -> None:
    run = await stored(backend, new_run(tenant))
    store = await backend.open()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(store.wait_for_change(run.run_id, 1, timeout=0.2), timeout=10)
    # Not before its timeout either: a store whose wait returns at once would pass otherwise.
    assert loop.time() - started >= 0.2


# ------------------------------------------------------------------------------------- workers
async def test_a_heartbeat_is_remembered_and_the_latest_one_wins(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    me, other = f"{tenant}/1", f"{tenant}/2"
    await store.workers.heartbeat(me, T0)
    await store.workers.heartbeat(me, T0 + timedelta(seconds=30))
    seen = await store.workers.last_seen([me, other, me + " "])
    assert seen == {me: T0 + timedelta(seconds=30)}
    assert await store.workers.last_seen([]) == {}
