"""Approval rules on the runtime side: eligibility, quorum, four-eyes, concurrency."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from signoff import Channel, Code, ExecutionStatus, Principal
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec
from signoff.core.registry import ActionRegistry
from signoff.core.run import ActionRun, ApprovalVote, RunStatus
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.store.memory import InMemoryRunStore, InMemoryStore
from tests.helpers import (
    LARGE,
    LEAD,
    LEAD2,
    Recorder,
    approve,
    definition,
    memory_runtime,
    proposal,
    reject,
)

TWO_LEADS = ApprovalSpec(when="true", approver_roles=("billing-lead",), count=2)


async def test_two_distinct_approvers_are_needed_when_count_is_two() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=TWO_LEADS))
    pending = await runtime.propose(proposal(LARGE))
    first = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert first.code == Code.APPROVAL_RECORDED
    assert first.outcome is not None and first.outcome.status is ExecutionStatus.PENDING_APPROVAL
    assert first.outcome.approval is not None and first.outcome.approval.approvals_received == 1
    assert recorder.count == 0
    second = await runtime.decide(pending.run_id, "acme", approve(LEAD2))
    assert second.outcome is not None and second.outcome.status is ExecutionStatus.SUCCEEDED
    assert recorder.count == 1


async def test_a_repeated_decision_by_the_same_approver_counts_once() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=TWO_LEADS))
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", approve(LEAD))
    repeat = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert repeat.code == Code.APPROVAL_ALREADY_DECIDED and not repeat.accepted
    run = await runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approval is not None and len(run.approval.decisions) == 1
    assert recorder.count == 0


async def test_the_proposer_never_approves_their_own_run() -> None:
    recorder = Recorder()
    proposer = Principal(id="lead-1", roles=("billing", "billing-lead"))
    runtime = memory_runtime(definition(recorder))
    pending = await runtime.propose(proposal(LARGE, principal=proposer))
    own = await runtime.decide(pending.run_id, "acme", approve(proposer))
    assert own.code == Code.APPROVER_NOT_ELIGIBLE
    assert recorder.count == 0


async def test_an_approver_without_a_listed_role_is_not_eligible() -> None:
    runtime = memory_runtime(definition(Recorder()))
    pending = await runtime.propose(proposal(LARGE))
    clerk = Principal(id="clerk", roles=("billing",))
    decision = await runtime.decide(pending.run_id, "acme", approve(clerk))
    assert decision.code == Code.APPROVER_NOT_ELIGIBLE
    rejection = await runtime.decide(pending.run_id, "acme", reject(clerk))
    assert rejection.code == Code.APPROVER_NOT_ELIGIBLE
    run = await runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL


async def test_one_rejection_ends_the_run_even_after_an_approval() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=TWO_LEADS))
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", approve(LEAD))
    rejected = await runtime.decide(pending.run_id, "acme", reject(LEAD2, "suspicious"))
    assert rejected.code == Code.APPROVAL_REJECTED
    assert rejected.outcome is not None and rejected.outcome.message == "suspicious"
    assert recorder.count == 0


async def test_a_raised_approver_count_at_resume_keeps_the_run_waiting() -> None:
    recorder = Recorder()
    registry = ActionRegistry([definition(recorder)])
    runtime = Runtime(registry, InMemoryStore(), clock=ManualClock())
    pending = await runtime.propose(proposal(LARGE))
    registry.replace([definition(recorder, approval=TWO_LEADS)])
    first = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert first.code == Code.APPROVAL_RECORDED
    second = await runtime.decide(pending.run_id, "acme", approve(LEAD2))
    assert second.outcome is not None and second.outcome.code == Code.SUCCEEDED
    assert recorder.count == 1


async def test_decisions_record_who_when_why_and_through_which_channel() -> None:
    runtime = memory_runtime(definition(Recorder(), approval=TWO_LEADS))
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(
        pending.run_id,
        "acme",
        DecisionRequest(
            approver=LEAD, vote=ApprovalVote.APPROVE, reason="fine", channel=Channel.CLI, via="ops"
        ),
    )
    run = await runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.approval is not None
    (decision,) = run.approval.decisions
    assert (decision.approver_id, decision.reason, decision.channel, decision.via) == (
        "lead-1",
        "fine",
        "cli",
        "ops",
    )
    assert decision.roles == ("billing-lead",)
    assert decision.at == runtime.now()


class GatedRuns(InMemoryRunStore):
    """Holds each thread's first compare-and-set at a barrier, so all start from one version."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier
        self.local = threading.local()

    async def compare_and_set(self, expected_version: int, run: ActionRun) -> ActionRun | None:
        if not getattr(self.local, "passed", False):
            self.local.passed = True
            self.barrier.wait()
        return await super().compare_and_set(expected_version, run)


@pytest.mark.parametrize("repetition", range(5))
def test_concurrent_approvers_dispatch_exactly_once(repetition: int) -> None:
    contenders = 8
    recorder = Recorder()
    store = InMemoryStore()
    store.runs = GatedRuns(threading.Barrier(contenders, timeout=10))
    runtime = Runtime(ActionRegistry([definition(recorder)]), store)
    store.runs.local.passed = True  # the proposal itself is not part of the race
    pending = asyncio.run(runtime.propose(proposal(LARGE)))
    results: list[Any] = []

    def approver(index: int) -> None:
        who = Principal(id=f"lead-{index}", roles=("billing-lead",))
        results.append(asyncio.run(runtime.decide(pending.run_id, "acme", approve(who))))

    threads = [threading.Thread(target=approver, args=(i,)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert recorder.count == 1
    assert sum(r.accepted for r in results) == 1
    assert {r.code for r in results if not r.accepted} == {Code.APPROVAL_NOT_PENDING}
    final = asyncio.run(runtime.get(pending.run_id, "acme"))
    assert final is not None and final.code == Code.SUCCEEDED


class Listener:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[tuple[str, str, RunStatus]] = []
        self.fail = fail

    async def approval_requested(self, run: ActionRun) -> None:
        self.events.append(("requested", run.run_id, run.status))
        if self.fail:
            raise ConnectionError("webhook down")

    async def approval_decided(self, run: ActionRun, decision: str) -> None:
        self.events.append((decision, run.run_id, run.status))
        if self.fail:
            raise ConnectionError("webhook down")


async def test_the_notifier_hears_requests_and_decisions_after_they_are_committed() -> None:
    listener = Listener()
    runtime = Runtime(ActionRegistry([definition(Recorder())]), InMemoryStore(), notifier=listener)
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", approve())
    await runtime.drain()
    assert listener.events == [
        ("requested", pending.run_id, RunStatus.WAITING_APPROVAL),
        ("approved", pending.run_id, RunStatus.SUCCEEDED),
    ]


async def test_a_failing_notifier_never_blocks_or_loses_a_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listener = Listener(fail=True)
    recorder = Recorder()
    runtime = Runtime(ActionRegistry([definition(recorder)]), InMemoryStore(), notifier=listener)
    pending = await runtime.propose(proposal(LARGE))
    decision = await runtime.decide(pending.run_id, "acme", approve())
    await runtime.drain()
    assert decision.outcome is not None and decision.outcome.code == Code.SUCCEEDED
    assert recorder.count == 1 and len(listener.events) == 2
    assert "notification failed" in caplog.text


async def test_a_decision_bound_to_a_version_is_refused_once_the_run_moved_on() -> None:
    from dataclasses import replace

    runtime = Runtime(
        ActionRegistry(
            [
                definition(
                    Recorder(),
                    approval=ApprovalSpec(when="true", approver_roles=("billing-lead",), count=2),
                )
            ]
        ),
        InMemoryStore(),
    )
    pending = await runtime.propose(proposal(LARGE))
    shown = await runtime.get_run(pending.run_id, "acme")
    assert shown is not None
    await runtime.decide(pending.run_id, "acme", approve(LEAD))
    late = await runtime.decide(
        pending.run_id, "acme", replace(approve(LEAD2), expected_version=shown.version)
    )
    current = await runtime.get_run(pending.run_id, "acme")
    assert late.code == Code.APPROVAL_RUN_CHANGED and not late.accepted
    assert current is not None and current.approval is not None
    assert [d.approver_id for d in current.approval.decisions] == [LEAD.id]
    fresh = await runtime.decide(
        pending.run_id, "acme", replace(approve(LEAD2), expected_version=current.version)
    )
    assert fresh.accepted and fresh.code == Code.SUCCEEDED
