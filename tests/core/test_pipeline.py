"""The governed pipeline, one named test per property (seed: Controlled-Action Completion Gate)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from signoff import (
    Code,
    ExecutionContext,
    ExecutionStatus,
    GuardDecision,
    RetryDisposition,
    RunStatus,
)
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec, DenyRule, PolicySpec
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
    reject,
)


async def test_unknown_action_is_refused_and_recorded_without_executing() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    outcome = await runtime.propose(proposal(SMALL, action="invoice.nope"))
    assert outcome.code == Code.ACTION_NOT_REGISTERED
    assert outcome.status is ExecutionStatus.VALIDATION_FAILED
    assert outcome.is_error
    stored = await runtime.get(outcome.run_id, "acme")
    assert stored is not None and stored.code == Code.ACTION_NOT_REGISTERED
    events = await runtime.audit_trail(outcome.run_id, "acme")
    assert [e.kind for e in events] == ["proposed", "refused"]
    assert recorder.count == 0


async def test_invalid_input_is_refused_with_every_error_and_nothing_executes() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    outcome = await runtime.propose(proposal({"invoice_id": "X", "amount": -1, "extra": 1}))
    assert outcome.code == Code.INPUT_VALIDATION_FAILED
    assert outcome.retry is RetryDisposition.AFTER_CORRECTION
    assert outcome.output is not None
    paths = {error["path"] for error in outcome.output["errors"]}
    assert paths == {"/", "/amount", "/invoice_id"}
    assert recorder.count == 0


async def test_a_missing_required_idempotency_key_is_refused() -> None:
    runtime = memory_runtime(definition(Recorder()))
    outcome = await runtime.propose(proposal(SMALL, key=None))
    assert outcome.code == Code.IDEMPOTENCY_KEY_REQUIRED
    assert outcome.status is ExecutionStatus.VALIDATION_FAILED


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "naïve"])
async def test_a_malformed_idempotency_key_is_refused(key: str) -> None:
    runtime = memory_runtime(definition(Recorder()))
    outcome = await runtime.propose(proposal(SMALL, key=key))
    assert outcome.code == Code.IDEMPOTENCY_KEY_INVALID


@pytest.mark.parametrize(
    ("roles", "amount", "expected_code", "expected_status"),
    [
        (("billing",), 10, Code.SUCCEEDED, ExecutionStatus.SUCCEEDED),
        (("billing-lead",), 10, Code.SUCCEEDED, ExecutionStatus.SUCCEEDED),
        (("support",), 10, Code.POLICY_DENIED, ExecutionStatus.DENIED),
        ((), 10, Code.POLICY_DENIED, ExecutionStatus.DENIED),
        (("billing",), 200_000, "AMOUNT_OVER_LIMIT", ExecutionStatus.DENIED),
        (("billing",), 5000, Code.APPROVAL_REQUIRED, ExecutionStatus.PENDING_APPROVAL),
    ],
)
async def test_policy_matrix_allows_and_denies_by_role_and_rule(
    roles: tuple[str, ...], amount: int, expected_code: str, expected_status: ExecutionStatus
) -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    principal = AGENT.model_copy(update={"roles": roles})
    outcome = await runtime.propose(
        proposal({"invoice_id": "INV-9", "amount": amount}, principal=principal)
    )
    assert outcome.code == expected_code
    assert outcome.status is expected_status
    assert recorder.count == (1 if expected_code == Code.SUCCEEDED else 0)


async def test_a_policy_expression_that_fails_at_evaluation_denies() -> None:
    rules = PolicySpec(deny=(DenyRule(when="input.no_such_field > 1", code="X"),))
    runtime = memory_runtime(definition(Recorder(), policy=rules, approval=NO_APPROVAL))
    outcome = await runtime.propose(proposal(SMALL))
    assert outcome.code == Code.POLICY_EVALUATION_ERROR
    assert outcome.status is ExecutionStatus.DENIED


async def test_approval_not_required_executes_immediately() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    outcome = await runtime.propose(proposal(SMALL))
    assert outcome.status is ExecutionStatus.SUCCEEDED
    assert outcome.output is not None and outcome.output["done"] == SMALL
    assert recorder.count == 1
    assert recorder.calls[0].operation_id.startswith(outcome.run_id + ":")


async def test_approval_required_leaves_the_run_pending_without_executing() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    outcome = await runtime.propose(proposal(LARGE))
    assert outcome.status is ExecutionStatus.PENDING_APPROVAL
    assert outcome.retry is RetryDisposition.AFTER_APPROVAL
    assert outcome.approval is not None and outcome.approval.approvals_needed == 1
    assert recorder.count == 0
    run = await runtime.get_run(outcome.run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL


async def test_the_safe_default_requires_approval_for_agent_writes_only() -> None:
    recorder = Recorder()
    runtime = memory_runtime(
        definition(recorder, approval=ApprovalSpec(), policy=PolicySpec()),
        definition(recorder, id="invoice.get", effect="read_only", approval=ApprovalSpec()),
    )
    write = await runtime.propose(proposal(SMALL))
    read = await runtime.propose(proposal(SMALL, action="invoice.get"))
    assert write.code == Code.APPROVAL_REQUIRED
    assert write.approval is not None and write.approval.approver_roles == ("approver",)
    assert read.code == Code.SUCCEEDED


async def test_approved_run_resumes_and_executes_once() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    pending = await runtime.propose(proposal(LARGE))
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.accepted
    assert decision.outcome is not None and decision.outcome.status is ExecutionStatus.SUCCEEDED
    assert recorder.count == 1
    again = await runtime.decide(pending.run_id, "acme", approve())
    assert again.code == Code.APPROVAL_NOT_PENDING
    assert recorder.count == 1


async def test_rejected_run_ends_denied_and_never_executes() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder))
    pending = await runtime.propose(proposal(LARGE))
    decision = await runtime.decide(pending.run_id, "acme", reject(reason="not this one"))
    assert decision.code == Code.APPROVAL_REJECTED
    outcome = await runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.status is ExecutionStatus.DENIED
    assert outcome.code == Code.APPROVAL_REJECTED
    assert recorder.count == 0


async def test_expired_approval_ends_the_run_and_its_reservation() -> None:
    clock = ManualClock()
    recorder = Recorder()
    spec = ApprovalSpec(
        when="true", approver_roles=("billing-lead",), expires_after=timedelta(hours=1)
    )
    runtime = memory_runtime(definition(recorder, approval=spec), clock=clock)
    pending = await runtime.propose(proposal(LARGE))
    clock.advance(timedelta(hours=1, seconds=1))
    assert await runtime.expire_overdue() == 1
    outcome = await runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.code == Code.APPROVAL_EXPIRED
    run = await runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.status is RunStatus.EXPIRED
    late = await runtime.decide(pending.run_id, "acme", approve())
    assert late.code == Code.APPROVAL_EXPIRED
    replay = await runtime.propose(proposal(LARGE))
    assert replay.code == Code.APPROVAL_EXPIRED and replay.duplicate_of == pending.run_id
    assert recorder.count == 0


async def test_deciding_an_overdue_run_expires_it_instead_of_approving() -> None:
    clock = ManualClock()
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder), clock=clock)
    pending = await runtime.propose(proposal(LARGE))
    clock.advance(timedelta(days=2))
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.code == Code.APPROVAL_EXPIRED
    assert recorder.count == 0


async def test_input_that_became_invalid_under_a_changed_definition_is_refused_at_resume() -> None:
    recorder = Recorder()
    registry = ActionRegistry([definition(recorder)])
    runtime = Runtime(registry, InMemoryStore(), clock=ManualClock())
    pending = await runtime.propose(proposal(LARGE))
    stricter = dict(definition(recorder).input_schema)
    stricter["properties"] = {
        **stricter["properties"],
        "amount": {"type": "number", "maximum": 100},
    }
    registry.replace([definition(recorder, input_schema=stricter)])
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.outcome is not None
    assert decision.outcome.code == Code.INPUT_VALIDATION_FAILED
    assert recorder.count == 0


async def test_policy_changed_before_approval_is_refused_at_resume() -> None:
    recorder = Recorder()
    registry = ActionRegistry([definition(recorder)])
    runtime = Runtime(registry, InMemoryStore(), clock=ManualClock())
    pending = await runtime.propose(proposal(LARGE))
    registry.replace([definition(recorder, policy=PolicySpec(roles=("finance",)))])
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.outcome is not None
    assert decision.outcome.code == Code.POLICY_REVALIDATION_DENIED
    assert decision.outcome.output == {"policy_code": Code.POLICY_DENIED}
    assert recorder.count == 0


async def test_an_action_removed_before_approval_is_refused_at_resume() -> None:
    recorder = Recorder()
    registry = ActionRegistry([definition(recorder)])
    runtime = Runtime(registry, InMemoryStore(), clock=ManualClock())
    pending = await runtime.propose(proposal(LARGE))
    registry.replace([])
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.outcome is not None and decision.outcome.code == Code.ACTION_NOT_REGISTERED
    assert recorder.count == 0


async def test_guard_denial_just_before_dispatch_stops_the_side_effect() -> None:
    recorder = Recorder()
    open_invoices = {"INV-2"}
    seen: list[str] = []

    def invoice_is_open(context: ExecutionContext) -> GuardDecision:
        seen.append(context.run_id)
        if context.input["invoice_id"] in open_invoices:
            return GuardDecision.allow()
        return GuardDecision.deny("INVOICE_NOT_OPEN", "The invoice was paid meanwhile.")

    runtime = memory_runtime(definition(recorder, guard=invoice_is_open))
    pending = await runtime.propose(proposal(LARGE))
    assert seen == []  # the guard runs at dispatch, not at proposal
    open_invoices.clear()  # the world changes while the approver thinks
    decision = await runtime.decide(pending.run_id, "acme", approve())
    assert decision.outcome is not None
    assert decision.outcome.code == "INVOICE_NOT_OPEN"
    assert decision.outcome.status is ExecutionStatus.DENIED
    assert seen == [pending.run_id]
    assert recorder.count == 0


async def test_a_guard_that_raises_fails_closed() -> None:
    recorder = Recorder()

    def broken(context: ExecutionContext) -> GuardDecision:
        raise RuntimeError("database down")

    runtime = memory_runtime(definition(recorder, guard=broken))
    outcome = await runtime.propose(proposal(SMALL))
    assert outcome.code == Code.PRE_EXECUTION_DENIED
    assert recorder.count == 0


async def test_every_decision_and_transition_is_audited_with_run_and_tenant() -> None:
    runtime = memory_runtime(definition(Recorder()))
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", approve())
    events = await runtime.audit_trail(pending.run_id, "acme")
    assert [e.kind for e in events] == [
        "proposed",
        "resolved",
        "policy_allowed",
        "reserved",
        "approval_requested",
        "approved_dispatching",
        "executed",
    ]
    assert {(e.run_id, e.tenant_id) for e in events} == {(pending.run_id, "acme")}
    assert events[-2].actor == LEAD.id
    assert events[-1].status == RunStatus.SUCCEEDED
