"""Races that can fail: real threads, each with its own event loop, released by barriers placed
immediately before the atomic step. A deliberately non-atomic store shows the harness catches it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from signoff import ActionOutcome, Code, ExecutionResult
from signoff.core.ports import DuplicateEntry, DuplicateState, Reservation, RunAlreadyExists
from signoff.core.registry import ActionRegistry
from signoff.core.run import ActionRun, DuplicateScope
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryDuplicateStore, InMemoryRunStore, InMemoryStore
from tests.helpers import NO_APPROVAL, SMALL, Recorder, bare_run, definition, proposal

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = DuplicateScope(tenant_id="t", action_id="a", idempotency_key="k", visibility="*")


class GatedDuplicates(InMemoryDuplicateStore):
    """Runs a per-thread hook right before reserve and complete; counts acceptances."""

    local = threading.local()

    def __init__(self) -> None:
        super().__init__()
        self.accepted = 0
        self._count_lock = threading.Lock()

    async def reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation:
        hook: Callable[[], Any] | None = getattr(self.local, "before_reserve", None)
        if hook is not None:
            hook()
        reservation = await self._reserve(scope, owner_run_id, input_hash, now)
        if reservation.accepted:
            with self._count_lock:
                self.accepted += 1
        return reservation

    async def _reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation:
        return await super().reserve(scope, owner_run_id, input_hash, now)

    async def complete(
        self, scope: DuplicateScope, owner_run_id: str, result: ExecutionResult, now: datetime
    ) -> bool:
        hook: Callable[[], Any] | None = getattr(self.local, "before_complete", None)
        if hook is not None:
            hook()
        return await super().complete(scope, owner_run_id, result, now)


class NonAtomicDuplicates(GatedDuplicates):
    """A broken store: checks, yields the CPU, then inserts — the bug the seeds warn about."""

    async def _reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation:
        existing = self._entries.get(scope)
        if existing is not None:
            return Reservation(accepted=False, existing=existing)
        time.sleep(0.02)  # noqa: ASYNC251 - widen the window between check and insert
        self._entries[scope] = DuplicateEntry(
            scope, owner_run_id, DuplicateState.RUNNING, input_hash, None, now
        )
        return Reservation(accepted=True)


def _runtime(duplicates: GatedDuplicates, recorder: Recorder) -> Runtime:
    store = InMemoryStore()
    store.duplicates = duplicates
    return Runtime(ActionRegistry([definition(recorder, approval=NO_APPROVAL)]), store)


def _in_thread(
    runtime: Runtime,
    duplicates: GatedDuplicates,
    results: list[ActionOutcome],
    before_reserve: Callable[[], Any] | None,
    before_complete: Callable[[], Any] | None,
) -> threading.Thread:
    def main() -> None:
        duplicates.local.before_reserve = before_reserve
        duplicates.local.before_complete = before_complete
        results.append(asyncio.run(runtime.propose(proposal(SMALL))))

    return threading.Thread(target=main)


def _race(
    duplicates: GatedDuplicates, first_wave: int = 12, second_wave: int = 6
) -> dict[str, Any]:
    """Wave 1 meets right before reserve. The winner then waits right before complete until
    wave 2 stands right before its own reserve, so completion and late reserves collide."""
    recorder = Recorder()
    runtime = _runtime(duplicates, recorder)
    at_reserve = threading.Barrier(first_wave, timeout=10)
    at_complete = threading.Barrier(1 + second_wave, timeout=10)
    early: list[ActionOutcome] = []
    late: list[ActionOutcome] = []
    wave1 = [
        _in_thread(runtime, duplicates, early, at_reserve.wait, at_complete.wait)
        for _ in range(first_wave)
    ]
    wave2 = [
        _in_thread(runtime, duplicates, late, at_complete.wait, None) for _ in range(second_wave)
    ]
    # Wave 2 can start at once: its threads block right before reserve until the winner is
    # right before complete.
    for thread in wave1 + wave2:
        thread.start()
    for thread in wave1 + wave2:
        thread.join(timeout=20)
    afterwards = asyncio.run(runtime.propose(proposal(SMALL)))
    return {
        "recorder": recorder,
        "early": early,
        "late": late,
        "afterwards": afterwards,
        "accepted": duplicates.accepted,
    }


@pytest.mark.parametrize("repetition", range(8))
def test_full_pipeline_reserve_versus_complete_race_accepts_exactly_once(repetition: int) -> None:
    outcome = _race(GatedDuplicates())
    assert outcome["accepted"] == 1
    recorder: Recorder = outcome["recorder"]
    assert recorder.count == 1
    winners = [o for o in outcome["early"] if o.duplicate_of is None]
    assert len(winners) == 1 and winners[0].code == Code.SUCCEEDED
    owner = winners[0]
    # Every duplicate sees either the reservation in progress or the original result.
    duplicates = [o for o in outcome["early"] if o is not owner] + outcome["late"]
    assert len(duplicates) == 12 - 1 + 6
    for duplicate in duplicates:
        assert duplicate.code in (Code.DUPLICATE_IN_PROGRESS, Code.SUCCEEDED)
        assert duplicate.duplicate_of == owner.run_id
        if duplicate.code == Code.SUCCEEDED:
            assert duplicate.output == owner.output
    # No terminal overwrite: every later duplicate gets the unchanged original result.
    assert outcome["afterwards"].output == owner.output
    assert outcome["afterwards"].duplicate_of == owner.run_id


def test_the_race_harness_catches_a_non_atomic_reservation() -> None:
    outcome = _race(NonAtomicDuplicates(), first_wave=8, second_wave=0)
    assert outcome["accepted"] > 1
    assert outcome["recorder"].count > 1


def _run_in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    def main(index: int) -> None:
        results[index] = asyncio.run(work(index))

    threads = [threading.Thread(target=main, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    return results


@pytest.mark.parametrize("repetition", range(5))
def test_sixteen_concurrent_compare_and_set_writers_from_one_version_exactly_one_wins(
    repetition: int,
) -> None:
    store = InMemoryRunStore()
    base = bare_run()
    asyncio.run(store.create(base))
    barrier = threading.Barrier(16, timeout=10)

    async def writer(index: int) -> ActionRun | None:
        update = base.model_copy(update={"input": {"writer": index}})
        barrier.wait()
        return await store.compare_and_set(1, update)

    results = _run_in_threads(16, writer)
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    stored = asyncio.run(store.get("r1"))
    assert stored is not None and stored.version == 2
    assert stored.input == winners[0].input


@pytest.mark.parametrize("repetition", range(5))
def test_sixteen_concurrent_reserves_accept_exactly_one(repetition: int) -> None:
    store = InMemoryDuplicateStore()
    barrier = threading.Barrier(16, timeout=10)

    async def reserve(index: int) -> Reservation:
        barrier.wait()
        return await store.reserve(SCOPE, f"run-{index}", "h", NOW)

    results = _run_in_threads(16, reserve)
    assert sum(r.accepted for r in results) == 1
    owner = next(f"run-{i}" for i, r in enumerate(results) if r.accepted)
    assert all(
        r.existing is not None and r.existing.owner_run_id == owner
        for r in results
        if not r.accepted
    )


async def test_aba_a_stale_owner_cannot_complete_or_release_a_newer_reservation() -> None:
    store = InMemoryDuplicateStore()
    assert (await store.reserve(SCOPE, "A", "h", NOW)).accepted
    assert await store.release(SCOPE, "A")
    assert (await store.reserve(SCOPE, "B", "h", NOW)).accepted
    assert not await store.complete(SCOPE, "A", ExecutionResult.succeeded({"from": "A"}), NOW)
    assert not await store.release(SCOPE, "A")
    entry = await store.get(SCOPE)
    assert entry is not None
    assert (entry.owner_run_id, entry.state, entry.result) == ("B", DuplicateState.RUNNING, None)
    assert await store.complete(SCOPE, "B", ExecutionResult.succeeded({"from": "B"}), NOW)
    assert not await store.complete(SCOPE, "B", ExecutionResult.succeeded({"again": 1}), NOW)
    assert not await store.release(SCOPE, "B")
    entry = await store.get(SCOPE)
    assert entry is not None and entry.result is not None
    assert entry.result.output == {"from": "B"}


@pytest.mark.parametrize("repetition", range(5))
def test_aba_a_stale_owner_racing_a_new_reserve_never_touches_it(repetition: int) -> None:
    store = InMemoryDuplicateStore()
    asyncio.run(store.reserve(SCOPE, "A", "h", NOW))
    asyncio.run(store.release(SCOPE, "A"))
    barrier = threading.Barrier(9, timeout=10)

    async def contender(index: int) -> Any:
        barrier.wait()
        if index == 0:
            return await store.reserve(SCOPE, "B", "h", NOW)
        if index % 2:
            return await store.complete(SCOPE, "A", ExecutionResult.succeeded(), NOW)
        return await store.release(SCOPE, "A")

    results = _run_in_threads(9, contender)
    assert results[0].accepted
    assert not any(results[1:])
    entry = asyncio.run(store.get(SCOPE))
    assert entry is not None and (entry.owner_run_id, entry.state) == ("B", DuplicateState.RUNNING)


async def test_create_never_overwrites_an_existing_run() -> None:
    store = InMemoryRunStore()
    run = bare_run()
    await store.create(run)
    with pytest.raises(RunAlreadyExists):
        await store.create(run.model_copy(update={"tenant_id": "other"}))
    stored = await store.get("r1")
    assert stored is not None and stored.tenant_id == "t"


async def test_a_terminal_run_refuses_every_compare_and_set() -> None:
    store = InMemoryRunStore()
    run = bare_run(status="DENIED")
    await store.create(run)
    assert await store.compare_and_set(1, run.model_copy(update={"input": {"x": 1}})) is None
    assert await store.get("r1") == run
