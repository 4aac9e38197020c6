"""Results: factories, the conservative default, executor return values, async work, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from signoff import (
    Code,
    ExecutionContext,
    ExecutionResult,
    ExecutionStatus,
    Principal,
    ResultMapping,
    RetryDisposition,
    RunStatus,
)
from signoff.core.dispatch import AsyncLane
from signoff.core.ports import StoreUnit
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import (
    AGENT,
    LARGE,
    LEAD,
    NO_APPROVAL,
    SMALL,
    Recorder,
    approve,
    definition,
    memory_runtime,
    proposal,
)


def test_an_unspecified_failure_defaults_to_manual_review() -> None:
    result = ExecutionResult(status=ExecutionStatus.FAILED, code="BOOM")  # type: ignore[call-arg]
    assert result.retry is RetryDisposition.MANUAL_REVIEW
    assert ExecutionResult.failure().retry is RetryDisposition.MANUAL_REVIEW


@pytest.mark.parametrize(
    ("factory", "retry"),
    [
        (ExecutionResult.retryable_failure, RetryDisposition.AFTER_BACKOFF),
        (ExecutionResult.correctable_failure, RetryDisposition.AFTER_CORRECTION),
        (ExecutionResult.permanent_failure, RetryDisposition.NEVER),
        (ExecutionResult.manual_review_failure, RetryDisposition.MANUAL_REVIEW),
    ],
)
def test_each_failure_factory_sets_its_disposition(factory: Any, retry: RetryDisposition) -> None:
    result = factory("DOMAIN_CODE", "why")
    assert result.status is ExecutionStatus.FAILED
    assert (result.code, result.retry, result.message) == ("DOMAIN_CODE", retry, "why")


def test_succeeded_carries_its_output_and_never_retries() -> None:
    result = ExecutionResult.succeeded({"id": 1})
    assert (result.status, result.code, result.retry) == (
        ExecutionStatus.SUCCEEDED,
        Code.SUCCEEDED,
        RetryDisposition.NEVER,
    )
    assert result.output == {"id": 1}


def _executor(value: Any) -> Any:
    async def executor(context: ExecutionContext) -> Any:
        if isinstance(value, Exception):
            raise value
        return value

    return executor


@pytest.mark.parametrize(
    ("returned", "status", "code", "retry"),
    [
        ({"ok": True}, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        (None, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        (
            RuntimeError("boom"),
            ExecutionStatus.FAILED,
            Code.ACTION_EXECUTION_EXCEPTION,
            RetryDisposition.MANUAL_REVIEW,
        ),
        ("a string", ExecutionStatus.FAILED, Code.ACTION_FAILED, RetryDisposition.MANUAL_REVIEW),
        (
            {"not": object()},
            ExecutionStatus.FAILED,
            Code.ACTION_FAILED,
            RetryDisposition.MANUAL_REVIEW,
        ),
        (
            ExecutionResult.permanent_failure("INVOICE_LOCKED"),
            ExecutionStatus.FAILED,
            "INVOICE_LOCKED",
            RetryDisposition.NEVER,
        ),
    ],
)
async def test_what_an_executor_returns_becomes_a_result(
    returned: Any, status: ExecutionStatus, code: str, retry: RetryDisposition
) -> None:
    runtime = memory_runtime(definition(_executor(returned)))
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.status, outcome.code, outcome.retry) == (status, code, retry)


async def test_a_domain_code_takes_the_status_and_retry_the_manifest_declares() -> None:
    mapping = {"INVOICE_ALREADY_PAID": ResultMapping(status="FAILED", retry="NEVER")}
    executor = _executor(ExecutionResult.failure("INVOICE_ALREADY_PAID", "paid"))
    runtime = memory_runtime(definition(executor, results=mapping))
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.code, outcome.retry) == ("INVOICE_ALREADY_PAID", RetryDisposition.NEVER)


async def test_a_plain_function_executor_runs_off_the_event_loop() -> None:
    import threading

    loop_thread = threading.get_ident()
    seen: list[int] = []

    def blocking(context: ExecutionContext) -> dict[str, Any]:
        seen.append(threading.get_ident())
        return {"ok": True}

    runtime = memory_runtime(definition(blocking))
    outcome = await runtime.propose(proposal(SMALL))
    assert outcome.code == Code.SUCCEEDED
    assert seen and seen[0] != loop_thread


def _async_runtime(executor: Any, lane: AsyncLane | None = None) -> Runtime:
    registry = ActionRegistry([definition(executor, mode="async", approval=NO_APPROVAL)])
    return Runtime(registry, InMemoryStore(), lane=lane)


async def test_async_work_answers_accepted_and_completes_later() -> None:
    release = asyncio.Event()

    async def slow(context: ExecutionContext) -> dict[str, Any]:
        await release.wait()
        return {"sent": True}

    runtime = _async_runtime(slow)
    accepted = await runtime.propose(proposal(SMALL))
    assert accepted.status is ExecutionStatus.ACCEPTED and accepted.code == Code.ACTION_ACCEPTED
    assert not accepted.status.is_final
    release.set()
    done = await runtime.wait(accepted.run_id, "acme", timeout=5)
    while done is not None and not done.status.is_final:
        done = await runtime.wait(accepted.run_id, "acme", timeout=5)
    assert done is not None and done.status is ExecutionStatus.SUCCEEDED
    assert done.output == {"sent": True}


async def test_async_failure_is_recorded_with_its_disposition() -> None:
    runtime = _async_runtime(_executor(RuntimeError("smtp down")))
    accepted = await runtime.propose(proposal(SMALL))
    await runtime.drain()
    done = await runtime.get(accepted.run_id, "acme")
    assert done is not None
    assert (done.code, done.retry) == (
        Code.ACTION_EXECUTION_EXCEPTION,
        RetryDisposition.MANUAL_REVIEW,
    )


async def test_a_full_lane_refuses_cleanly_without_reserving() -> None:
    release = asyncio.Event()

    async def slow(context: ExecutionContext) -> dict[str, Any]:
        await release.wait()
        return {}

    runtime = _async_runtime(slow, lane=AsyncLane(max_concurrency=1, max_pending=0))
    first = await runtime.propose(proposal(SMALL, key="a"))
    refused = await runtime.propose(proposal(SMALL, key="b"))
    assert first.status is ExecutionStatus.ACCEPTED
    assert (refused.code, refused.retry) == (Code.ACTION_LANE_FULL, RetryDisposition.AFTER_BACKOFF)
    release.set()
    await runtime.drain()
    retried = await runtime.propose(proposal(SMALL, key="b"))
    assert retried.duplicate_of is None and retried.status is ExecutionStatus.ACCEPTED
    await runtime.drain()


async def test_cancel_before_dispatch_stops_queued_background_work() -> None:
    release = asyncio.Event()
    recorder = Recorder()

    async def gate(context: ExecutionContext) -> dict[str, Any]:
        await release.wait()
        return await recorder(context)

    runtime = _async_runtime(gate, lane=AsyncLane(max_concurrency=1, max_pending=4))
    busy = await runtime.propose(proposal(SMALL, key="busy"))
    queued = await runtime.propose(proposal(SMALL, key="queued"))
    cancelled = await runtime.cancel(queued.run_id, "acme", AGENT)
    assert cancelled.status is ExecutionStatus.CANCELLED and cancelled.code == Code.ACTION_CANCELLED
    release.set()
    await runtime.drain()
    assert [c.run_id for c in recorder.calls] == [busy.run_id]
    final = await runtime.get_run(queued.run_id, "acme")
    assert final is not None and final.status is RunStatus.CANCELLED


async def test_cancel_while_waiting_for_approval_ends_the_run_and_blocks_approval() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    pending = await runtime.propose(proposal(LARGE))
    cancelled = await runtime.cancel(pending.run_id, "acme", AGENT)
    assert cancelled.code == Code.ACTION_CANCELLED
    late = await runtime.decide(pending.run_id, "acme", approve())
    assert late.code == Code.APPROVAL_NOT_PENDING
    replay = await runtime.propose(proposal(LARGE))
    assert replay.code == Code.ACTION_CANCELLED and replay.duplicate_of == pending.run_id
    assert recorder.count == 0


async def test_cancel_after_terminal_changes_nothing() -> None:
    runtime = memory_runtime(definition(Recorder()))
    done = await runtime.propose(proposal(SMALL))
    refused = await runtime.cancel(done.run_id, "acme", AGENT)
    assert refused.code == Code.ACTION_RUN_ALREADY_TERMINAL
    assert refused.status is ExecutionStatus.SUCCEEDED
    again = await runtime.get(done.run_id, "acme")
    assert again == done


async def test_a_running_synchronous_run_is_never_reported_cancelled() -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow(context: ExecutionContext) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {"done": True}

    runtime = memory_runtime(definition(slow))
    call = asyncio.create_task(runtime.propose(proposal(SMALL)))
    await entered.wait()
    (running,) = await runtime.list_runs("acme")
    refused = await runtime.cancel(running.run_id, "acme", AGENT)
    assert refused.code == Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING
    release.set()
    assert (await call).status is ExecutionStatus.SUCCEEDED


async def test_only_the_proposer_or_an_approver_may_cancel() -> None:
    runtime = memory_runtime(definition(Recorder()))
    pending = await runtime.propose(proposal(LARGE))
    stranger = await runtime.cancel(pending.run_id, "acme", Principal(id="x", roles=("billing",)))
    assert stranger.code == Code.POLICY_DENIED
    by_lead = await runtime.cancel(pending.run_id, "acme", LEAD)
    assert by_lead.code == Code.ACTION_CANCELLED


async def test_another_tenants_run_reads_exactly_like_a_missing_one() -> None:
    runtime = memory_runtime(definition(Recorder()))
    pending = await runtime.propose(proposal(LARGE))
    assert await runtime.get(pending.run_id, "globex") is None
    assert await runtime.get("no-such-run", "acme") is None
    foreign = await runtime.cancel(pending.run_id, "globex", AGENT)
    missing = await runtime.cancel("no-such-run", "globex", AGENT)
    assert foreign.code == missing.code == Code.ACTION_RUN_NOT_FOUND
    decided = await runtime.decide(pending.run_id, "globex", approve())
    assert decided.code == Code.ACTION_RUN_NOT_FOUND and decided.outcome is None


class BrokenUnits(InMemoryStore):
    """A store whose second unit of work cannot start, as in a database outage."""

    def __init__(self) -> None:
        super().__init__()
        self.units = 0

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[StoreUnit]:
        self.units += 1
        if self.units == 2:
            raise ConnectionError("database went away")
        async with super().unit() as unit:
            yield unit


async def test_a_store_failure_answers_runtime_failed_for_review_and_recovery_settles_it() -> None:
    recorder = Recorder()
    store = BrokenUnits()
    registry = ActionRegistry([definition(recorder, approval=NO_APPROVAL)])
    runtime = Runtime(registry, store)
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.status, outcome.code, outcome.retry) == (
        ExecutionStatus.FAILED,
        Code.ACTION_RUNTIME_FAILED,
        RetryDisposition.MANUAL_REVIEW,
    )
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.RUNNING and recorder.count == 1
    later = Runtime(registry, store, instance_id=runtime.instance_id)
    report = await later.recover()
    assert report.interrupted == [outcome.run_id]
    replay = await later.propose(proposal(SMALL))
    assert replay.code == Code.ACTION_INTERRUPTED and recorder.count == 1
