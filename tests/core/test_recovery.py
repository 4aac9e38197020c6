"""Recovery reconciles non-terminal runs by state, with the normal CAS transitions.

A crash is simulated by leaving a run RUNNING (its executor never returns) and recovering from
a second runtime over the same store. Real SIGKILL crash tests against SQLite live in tests/store.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from signoff import Code, ExecutionContext, ExecutionStatus, RetryDisposition, RunStatus
from signoff.core.clock import ManualClock
from signoff.core.definition import PolicySpec
from signoff.core.dispatch import AsyncLane
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import LARGE, NO_APPROVAL, SMALL, definition, proposal


class Provider:
    """Records side effects by operation id; ``hang`` makes the first call never return."""

    def __init__(self) -> None:
        self.effects: list[str] = []
        self.entered = asyncio.Event()
        self.hang = True

    async def __call__(self, context: ExecutionContext) -> dict[str, Any]:
        self.effects.append(context.operation_id)
        if self.hang:
            self.hang = False
            self.entered.set()
            await asyncio.Event().wait()
        return {"operation_id": context.operation_id}


@pytest.fixture
async def crashed() -> AsyncIterator[list[Runtime]]:
    runtimes: list[Runtime] = []
    yield runtimes
    for runtime in runtimes:
        # A crash: the background work dies without finishing (the runtime's private task set).
        await runtime._background.abandon()


async def _crash_mid_execution(
    crashed: list[Runtime], provider: Provider, store: InMemoryStore, **fields: Any
) -> tuple[ActionRegistry, str]:
    registry = ActionRegistry([definition(provider, approval=NO_APPROVAL, **fields)])
    first = Runtime(registry, store, instance_id="node-a")
    crashed.append(first)
    asyncio.get_running_loop().create_task(first.propose(proposal(SMALL)))
    await provider.entered.wait()
    (run,) = await store.runs.list(statuses=[RunStatus.RUNNING])
    return registry, run.run_id


async def test_a_running_non_idempotent_run_becomes_failed_for_manual_review(
    crashed: list[Runtime],
) -> None:
    provider, store = Provider(), InMemoryStore()
    registry, run_id = await _crash_mid_execution(crashed, provider, store)
    report = await Runtime(registry, store, instance_id="node-a").recover()
    assert report.interrupted == [run_id]
    run = await store.runs.get(run_id)
    assert run is not None and run.status is RunStatus.FAILED and run.result is not None
    assert (run.result.code, run.result.retry) == (
        Code.ACTION_INTERRUPTED,
        RetryDisposition.MANUAL_REVIEW,
    )
    assert len(provider.effects) == 1
    entry = await store.duplicates.get(run.duplicate_scope)  # type: ignore[arg-type]
    assert entry is not None and entry.result == run.result


async def test_an_idempotent_executor_is_redispatched_with_the_same_operation_id(
    crashed: list[Runtime],
) -> None:
    provider, store = Provider(), InMemoryStore()
    registry, run_id = await _crash_mid_execution(
        crashed, provider, store, executor_idempotent=True
    )
    report = await Runtime(registry, store, instance_id="node-a").recover()
    assert report.redispatched == [run_id]
    run = await store.runs.get(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert provider.effects == [run.operation_id, run.operation_id]


async def test_a_dead_instances_work_is_recovered_by_another_once_its_heartbeat_is_stale(
    crashed: list[Runtime],
) -> None:
    provider, store = Provider(), InMemoryStore()
    registry, run_id = await _crash_mid_execution(crashed, provider, store)
    await store.workers.heartbeat(crashed[0].worker_id, crashed[0].now() - timedelta(minutes=5))
    report = await Runtime(registry, store, instance_id="node-b").recover()
    assert report.interrupted == [run_id]


async def test_recovery_never_touches_another_live_instances_running_work(
    crashed: list[Runtime],
) -> None:
    provider, store = Provider(), InMemoryStore()
    registry, run_id = await _crash_mid_execution(crashed, provider, store)
    await crashed[0].heartbeat()  # node-a is alive and says so
    report = await Runtime(registry, store, instance_id="node-b").recover()
    assert report.skipped == 1 and report.interrupted == []
    run = await store.runs.get(run_id)
    assert run is not None and run.status is RunStatus.RUNNING


async def test_a_redispatch_the_current_policy_refuses_goes_to_manual_review(
    crashed: list[Runtime],
) -> None:
    provider, store = Provider(), InMemoryStore()
    registry, run_id = await _crash_mid_execution(
        crashed, provider, store, executor_idempotent=True
    )
    registry.replace(
        [
            definition(
                provider,
                approval=NO_APPROVAL,
                executor_idempotent=True,
                policy=PolicySpec(roles=("finance",)),
            )
        ]
    )
    await Runtime(registry, store, instance_id="node-a").recover()
    run = await store.runs.get(run_id)
    assert run is not None and run.result is not None
    assert (run.result.code, run.result.retry) == (
        Code.POLICY_REVALIDATION_DENIED,
        RetryDisposition.MANUAL_REVIEW,
    )
    assert len(provider.effects) == 1


async def test_background_work_never_claimed_is_dispatched_at_recovery() -> None:
    provider = Provider()
    provider.hang = False
    store = InMemoryStore()
    registry = ActionRegistry([definition(provider, approval=NO_APPROVAL, mode="async")])
    lane = AsyncLane()

    def admit(tenant_id: str = "") -> bool:
        return True

    def lose(work: object, tenant_id: str = "") -> None:
        return None

    lane.try_acquire = admit  # type: ignore[method-assign]
    lane.submit = lose  # type: ignore[assignment,method-assign]
    first = Runtime(registry, store, instance_id="node-a", lane=lane)
    accepted = await first.propose(proposal(SMALL))  # committed RUNNING, never picked up
    report = await Runtime(registry, store, instance_id="node-a").recover()
    assert report.redispatched == [accepted.run_id]
    run = await store.runs.get(accepted.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert provider.effects == [run.operation_id]


async def test_waiting_approvals_keep_waiting_and_overdue_ones_expire() -> None:
    clock = ManualClock()
    store = InMemoryStore()
    registry = ActionRegistry([definition(Provider())])
    runtime = Runtime(registry, store, clock=clock)
    fresh = await runtime.propose(proposal(LARGE, key="fresh"))
    clock.advance(timedelta(hours=23))
    young = await runtime.propose(proposal(LARGE, key="young"))
    clock.advance(timedelta(hours=2))
    report = await Runtime(registry, store, clock=clock).recover()
    assert report.expired == 1
    expired = await runtime.get(fresh.run_id, "acme")
    assert expired is not None and expired.code == Code.APPROVAL_EXPIRED
    waiting = await runtime.get(young.run_id, "acme")
    assert waiting is not None and waiting.status is ExecutionStatus.PENDING_APPROVAL


@pytest.mark.parametrize("repetition", range(5))
def test_two_recoverers_at_once_never_double_dispatch(repetition: int) -> None:
    effects: list[str] = []
    lock = threading.Lock()

    def idempotent_effect(context: ExecutionContext) -> dict[str, Any]:
        with lock:
            effects.append(context.operation_id)
        return {}

    store = InMemoryStore()
    registry = ActionRegistry(
        [definition(idempotent_effect, approval=NO_APPROVAL, executor_idempotent=True)]
    )
    crashed = Runtime(registry, store, instance_id="node-a")
    # dies right after the RUNNING commit
    crashed._dispatcher.dispatch = _never  # type: ignore[method-assign,assignment]
    asyncio.run(crashed.propose(proposal(SMALL)))
    barrier = threading.Barrier(4, timeout=10)

    def recoverer(index: int) -> None:
        runtime = Runtime(registry, store, instance_id=f"node-{index}")
        barrier.wait()
        asyncio.run(runtime.recover())

    threads = [threading.Thread(target=recoverer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert len(effects) == 1
    (run,) = asyncio.run(store.runs.list())
    assert run.status is RunStatus.SUCCEEDED


async def _never(*args: Any) -> Any:
    from signoff.core.answers import outcome_of

    return outcome_of(args[1])
