"""Deferred execution: dispatch, completion by attempt token, external cancellation, orphans."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest

from signoff import (
    Code,
    ExecutionContext,
    ExecutionResult,
    ExecutionStatus,
    RetryDisposition,
    RunStatus,
)
from signoff.core.clock import ManualClock
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import AGENT, NO_APPROVAL, SMALL, definition, memory_runtime, proposal


class ExternalSystem:
    """A payment provider stand-in: accepts operations, deduplicates by operation id."""

    def __init__(self) -> None:
        self.accepted: dict[str, dict[str, Any]] = {}
        self.cancelled: list[str] = []
        self.cancel_fails = False

    async def send(self, context: ExecutionContext) -> dict[str, Any]:
        self.accepted.setdefault(context.operation_id, dict(context.input))
        return {"provider_ref": f"pay-{len(self.accepted)}"}

    async def cancel(self, context: ExecutionContext) -> None:
        if self.cancel_fails:
            raise ConnectionError("provider unreachable")
        self.cancelled.append(context.operation_id)


def _deferred(system: ExternalSystem, clock: ManualClock | None = None, **extra: Any) -> Runtime:
    fields: dict[str, Any] = {
        "mode": "deferred",
        "approval": NO_APPROVAL,
        "cancel": system.cancel,
        "timeout": timedelta(minutes=10),
    }
    fields.update(extra)
    return memory_runtime(definition(system.send, **fields), clock=clock)


async def _token(runtime: Runtime, run_id: str) -> str:
    run = await runtime.get_run(run_id, "acme")
    assert run is not None and run.attempt_token is not None
    return run.attempt_token


async def test_deferred_dispatch_waits_externally_with_a_deterministic_operation_id() -> None:
    system = ExternalSystem()
    runtime = _deferred(system)
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.status, outcome.code) == (ExecutionStatus.ACCEPTED, Code.ACTION_DEFERRED)
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_EXTERNAL
    assert list(system.accepted) == [f"{run.run_id}:{run.attempt_token}"]
    kinds = [e.kind for e in await runtime.audit_trail(run.run_id, "acme")]
    assert kinds[-2:] == ["dispatching", "external_accepted"]


async def test_a_completion_with_the_matching_token_finishes_the_run() -> None:
    runtime = _deferred(ExternalSystem())
    outcome = await runtime.propose(proposal(SMALL))
    token = await _token(runtime, outcome.run_id)
    done = await runtime.complete(outcome.run_id, token, ExecutionResult.succeeded({"paid": True}))
    assert done.accepted and done.code == Code.SUCCEEDED
    stored = await runtime.get(outcome.run_id, "acme")
    assert stored is not None and stored.output == {"paid": True}
    replay = await runtime.propose(proposal(SMALL))
    assert replay.output == {"paid": True} and replay.duplicate_of == outcome.run_id


async def test_a_stale_token_is_refused_and_changes_nothing() -> None:
    runtime = _deferred(ExternalSystem())
    outcome = await runtime.propose(proposal(SMALL))
    stale = await runtime.complete(outcome.run_id, "not-the-token", ExecutionResult.succeeded())
    assert stale.code == Code.STALE_ACTION_ATTEMPT and not stale.accepted
    assert stale.outcome is None
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_EXTERNAL


async def test_a_repeated_completion_returns_the_stored_result() -> None:
    runtime = _deferred(ExternalSystem())
    outcome = await runtime.propose(proposal(SMALL))
    token = await _token(runtime, outcome.run_id)
    await runtime.complete(outcome.run_id, token, ExecutionResult.succeeded({"n": 1}))
    again = await runtime.complete(outcome.run_id, token, ExecutionResult.permanent_failure("NO"))
    assert not again.accepted
    assert again.outcome is not None and again.outcome.output == {"n": 1}


async def test_a_completion_from_another_tenant_reads_like_a_missing_run() -> None:
    runtime = _deferred(ExternalSystem())
    outcome = await runtime.propose(proposal(SMALL))
    token = await _token(runtime, outcome.run_id)
    foreign = await runtime.complete(
        outcome.run_id, token, ExecutionResult.succeeded(), tenant_id="globex"
    )
    missing = await runtime.complete("nope", token, ExecutionResult.succeeded(), tenant_id="globex")
    assert foreign.code == missing.code == Code.ACTION_RUN_NOT_FOUND
    assert foreign.outcome is None


async def test_a_non_terminal_completion_result_is_refused() -> None:
    runtime = _deferred(ExternalSystem())
    outcome = await runtime.propose(proposal(SMALL))
    token = await _token(runtime, outcome.run_id)
    pending = ExecutionResult(
        status=ExecutionStatus.ACCEPTED, code="X", retry=RetryDisposition.NEVER
    )
    refused = await runtime.complete(outcome.run_id, token, pending)
    assert refused.code == Code.ACTION_RESULT_NOT_TERMINAL


async def test_cancel_while_waiting_externally_calls_the_hook_once_per_operation() -> None:
    system = ExternalSystem()
    runtime = _deferred(system)
    outcome = await runtime.propose(proposal(SMALL))
    cancelled = await runtime.cancel(outcome.run_id, "acme", AGENT)
    assert (cancelled.status, cancelled.code) == (ExecutionStatus.CANCELLED, Code.ACTION_CANCELLED)
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and system.cancelled == [run.operation_id]
    token = await _token(runtime, outcome.run_id)
    late = await runtime.complete(outcome.run_id, token, ExecutionResult.succeeded())
    assert not late.accepted and late.code == Code.ACTION_CANCELLED


async def test_a_failing_cancel_hook_cancels_with_manual_review_visible_on_reads() -> None:
    system = ExternalSystem()
    system.cancel_fails = True
    runtime = _deferred(system)
    outcome = await runtime.propose(proposal(SMALL))
    cancelled = await runtime.cancel(outcome.run_id, "acme", AGENT)
    assert cancelled.code == Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED
    assert cancelled.retry is RetryDisposition.MANUAL_REVIEW
    read = await runtime.get(outcome.run_id, "acme")
    assert read is not None and read.code == Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED


async def test_an_overdue_external_run_follows_the_default_orphan_policy() -> None:
    clock = ManualClock()
    runtime = _deferred(ExternalSystem(), clock=clock)
    outcome = await runtime.propose(proposal(SMALL))
    assert await runtime.sweep_external() == 0
    clock.advance(timedelta(minutes=11))
    assert await runtime.sweep_external() == 1
    read = await runtime.get(outcome.run_id, "acme")
    assert read is not None
    assert (read.status, read.code, read.retry) == (
        ExecutionStatus.FAILED,
        Code.ACTION_EXTERNAL_TIMEOUT,
        RetryDisposition.MANUAL_REVIEW,
    )


async def test_the_cancel_orphan_policy_calls_the_hook() -> None:
    clock = ManualClock()
    system = ExternalSystem()
    runtime = _deferred(system, clock=clock, orphan="cancel")
    outcome = await runtime.propose(proposal(SMALL))
    clock.advance(timedelta(hours=1))
    await runtime.sweep_external()
    read = await runtime.get(outcome.run_id, "acme")
    assert read is not None and read.code == Code.ACTION_CANCELLED
    assert len(system.cancelled) == 1


async def test_an_executor_answering_a_final_result_needs_no_external_wait() -> None:
    async def refuses(context: ExecutionContext) -> ExecutionResult:
        return ExecutionResult.correctable_failure("CARD_DECLINED", "declined")

    runtime = memory_runtime(definition(refuses, mode="deferred", approval=NO_APPROVAL))
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.code, outcome.retry) == ("CARD_DECLINED", RetryDisposition.AFTER_CORRECTION)


@pytest.mark.parametrize("repetition", range(5))
def test_complete_versus_cancel_and_cancel_versus_cancel_converge_on_one_result(
    repetition: int,
) -> None:
    system = ExternalSystem()
    runtime = Runtime(
        ActionRegistry(
            [definition(system.send, mode="deferred", approval=NO_APPROVAL, cancel=system.cancel)]
        ),
        InMemoryStore(),
    )
    outcome = asyncio.run(runtime.propose(proposal(SMALL)))
    token = asyncio.run(_token(runtime, outcome.run_id))
    barrier = threading.Barrier(6, timeout=10)
    answers: list[Any] = []

    def contender(index: int) -> None:
        async def go() -> Any:
            barrier.wait()
            if index % 2:
                return await runtime.cancel(outcome.run_id, "acme", AGENT)
            return await runtime.complete(
                outcome.run_id, token, ExecutionResult.succeeded({"i": index})
            )

        answers.append(asyncio.run(go()))

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    final = asyncio.run(runtime.get(outcome.run_id, "acme"))
    assert final is not None and final.status in (
        ExecutionStatus.SUCCEEDED,
        ExecutionStatus.CANCELLED,
    )
    deciders = [a for a in answers if getattr(a, "accepted", False)]
    cancels = [a for a in answers if hasattr(a, "status") and a.code == Code.ACTION_CANCELLED]
    assert len(deciders) + len(cancels) == 1
    for answer in answers:
        outcome_seen = answer.outcome if hasattr(answer, "accepted") else answer
        if outcome_seen is not None and outcome_seen.code not in (
            Code.ACTION_RUN_ALREADY_TERMINAL,
        ):
            assert outcome_seen.status == final.status


async def test_a_callback_that_arrives_before_waiting_external_is_committed_still_wins() -> None:
    runtimes: list[Runtime] = []

    async def fast_provider(context: ExecutionContext) -> dict[str, Any]:
        # The external system finishes and calls back before dispatch returns.
        done = await runtimes[0].complete(
            context.run_id, context.attempt_token, ExecutionResult.succeeded({"fast": True})
        )
        assert done.accepted
        return {"provider_ref": "late receipt"}

    runtime = memory_runtime(definition(fast_provider, mode="deferred", approval=NO_APPROVAL))
    runtimes.append(runtime)
    outcome = await runtime.propose(proposal(SMALL))
    assert (outcome.status, outcome.output) == (ExecutionStatus.SUCCEEDED, {"fast": True})
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.SUCCEEDED
