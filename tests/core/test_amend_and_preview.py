"""Amend before approve, and previews: what approvers change is checked in full and recorded
beside what was proposed; what a dry run showed is bound to the run and reaches the guard."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from signoff import Code, ExecutionContext, ExecutionResult, ExecutionStatus, GuardDecision
from signoff.core.definition import ApprovalSpec, DenyRule, Escalation, PolicySpec
from signoff.core.run import RunStatus
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

AMENDABLE = ApprovalSpec(when="true", approver_roles=("billing-lead",), amend=("amount",))


def amend(**changes: Any) -> Any:
    return replace(approve(LEAD), amendments=changes)


async def test_an_approver_amends_a_listed_field_and_the_executor_gets_the_approved_input() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=AMENDABLE))
    pending = await runtime.propose(proposal(LARGE))
    decided = await runtime.decide(pending.run_id, "acme", amend(amount=4500))
    run = await runtime.get_run(pending.run_id, "acme")
    assert decided.accepted and decided.code == Code.SUCCEEDED
    assert recorder.calls[0].input == {"invoice_id": "INV-2", "amount": 4500}
    assert run is not None
    assert run.input == LARGE  # what the agent proposed is kept
    assert run.approved_input == {"invoice_id": "INV-2", "amount": 4500}
    (record,) = run.amendments
    assert (record.approver_id, record.changes, record.previous) == (
        LEAD.id,
        {"amount": 4500},
        {"amount": 5000},
    )
    outcome = await runtime.get(pending.run_id, "acme")
    assert outcome is not None and outcome.amended
    assert outcome.approved_input == {"invoice_id": "INV-2", "amount": 4500}
    trail = await runtime.audit_trail(pending.run_id, "acme")
    amended = [e for e in trail if e.data and "amended" in e.data]
    assert amended and amended[0].data is not None
    assert amended[0].data["amended"]["changes"] == {"amount": 4500}


async def test_a_field_the_manifest_does_not_list_cannot_be_amended() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=AMENDABLE))
    pending = await runtime.propose(proposal(LARGE))
    refused = await runtime.decide(pending.run_id, "acme", amend(invoice_id="INV-999"))
    run = await runtime.get_run(pending.run_id, "acme")
    assert refused.code == Code.AMENDMENT_NOT_ALLOWED and not refused.accepted
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert run.approved_input is None and run.approval is not None and run.approval.decisions == ()
    assert recorder.count == 0


async def test_an_amended_input_is_validated_again() -> None:
    runtime = memory_runtime(definition(Recorder(), approval=AMENDABLE))
    pending = await runtime.propose(proposal(LARGE))
    refused = await runtime.decide(pending.run_id, "acme", amend(amount=-5))
    wrong_type = await runtime.decide(pending.run_id, "acme", amend(amount="lots"))
    assert refused.code == wrong_type.code == Code.AMENDMENT_INVALID


async def test_an_amended_input_that_policy_now_denies_is_refused_and_the_run_keeps_waiting() -> (
    None
):
    policy = PolicySpec(
        roles=("billing",),
        deny=(DenyRule(when="input.amount > 100000.0", code="AMOUNT_OVER_LIMIT"),),
    )
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=AMENDABLE, policy=policy))
    pending = await runtime.propose(proposal(LARGE))
    refused = await runtime.decide(pending.run_id, "acme", amend(amount=250000))
    run = await runtime.get_run(pending.run_id, "acme")
    assert refused.code == Code.AMENDMENT_DENIED
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL and recorder.count == 0


async def test_only_an_approval_amends() -> None:
    runtime = memory_runtime(definition(Recorder(), approval=AMENDABLE))
    pending = await runtime.propose(proposal(LARGE))
    refused = await runtime.decide(
        pending.run_id, "acme", replace(reject(LEAD), amendments={"amount": 1})
    )
    assert refused.code == Code.AMENDMENT_NOT_ALLOWED


async def test_the_guard_sees_the_approved_input() -> None:
    seen: list[dict[str, Any]] = []

    def guard(context: ExecutionContext) -> GuardDecision:
        seen.append(dict(context.input))
        return GuardDecision.allow()

    runtime = memory_runtime(definition(Recorder(), approval=AMENDABLE, guard=guard))
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", amend(amount=4000))
    assert seen == [{"invoice_id": "INV-2", "amount": 4000}]


# ------------------------------------------------------------------------------------ previews
def previewing(answer: Any) -> Any:
    calls: list[ExecutionContext] = []

    def preview(context: ExecutionContext) -> Any:
        calls.append(context)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    preview.calls = calls  # type: ignore[attr-defined]
    return preview


async def test_a_preview_runs_before_the_approval_request_and_is_bound_to_the_run() -> None:
    preview = previewing({"would_cancel": "INV-2", "open_balance": 5000})
    seen: list[ExecutionContext] = []

    def guard(context: ExecutionContext) -> GuardDecision:
        seen.append(context)
        return GuardDecision.allow()

    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=AMENDABLE, preview=preview, guard=guard))
    pending = await runtime.propose(proposal(LARGE))
    run = await runtime.get_run(pending.run_id, "acme")
    assert pending.code == Code.APPROVAL_REQUIRED and recorder.count == 0
    assert run is not None and run.preview is not None
    assert run.preview.output == {"would_cancel": "INV-2", "open_balance": 5000}
    assert len(run.preview.digest) == 64
    await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert seen[0].preview == run.preview.output
    assert seen[0].preview_digest == run.preview.digest
    assert len(preview.calls) == 1


async def test_a_guard_can_refuse_when_the_world_changed_since_the_preview() -> None:
    preview = previewing({"open_balance": 5000})

    def guard(context: ExecutionContext) -> GuardDecision:
        current_balance = 0  # someone paid the invoice meanwhile
        assert context.preview is not None
        if context.preview["open_balance"] != current_balance:
            return GuardDecision.deny("PREVIEW_STALE", "The invoice changed since the preview.")
        return GuardDecision.allow()

    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=AMENDABLE, preview=preview, guard=guard))
    pending = await runtime.propose(proposal(LARGE))
    decided = await runtime.decide(pending.run_id, "acme", approve(LEAD))
    assert decided.code == "PREVIEW_STALE" and recorder.count == 0


async def test_a_failed_preview_ends_the_run_before_anyone_is_asked() -> None:
    for answer in (RuntimeError("the ERP is down: postgresql://u:pw@db"), "not an object"):
        runtime = memory_runtime(
            definition(Recorder(), approval=AMENDABLE, preview=previewing(answer))
        )
        outcome = await runtime.propose(proposal(LARGE, key=f"k-{type(answer).__name__}"))
        run = await runtime.get_run(outcome.run_id, "acme")
        assert outcome.status is ExecutionStatus.FAILED and outcome.code == Code.PREVIEW_FAILED
        assert "postgresql" not in outcome.message
        assert run is not None and run.is_terminal and run.approval is None
        assert run.duplicate_scope is None  # nothing was reserved


async def test_a_preview_may_refuse_with_its_own_code() -> None:
    preview = previewing(
        ExecutionResult.correctable_failure("INVOICE_NOT_FOUND", "No such invoice.")
    )
    runtime = memory_runtime(definition(Recorder(), approval=AMENDABLE, preview=preview))
    outcome = await runtime.propose(proposal(LARGE))
    assert outcome.code == "INVOICE_NOT_FOUND" and outcome.status is ExecutionStatus.FAILED


async def test_no_preview_runs_when_no_approval_is_needed() -> None:
    preview = previewing({"x": 1})
    recorder = Recorder()
    runtime = memory_runtime(
        definition(recorder, approval=ApprovalSpec(when="false"), preview=preview)
    )
    outcome = await runtime.propose(proposal(LARGE))
    assert outcome.code == Code.SUCCEEDED and preview.calls == []


# --------------------------------------------------------------------------------- escalation
TIERED = ApprovalSpec(
    when="true",
    approver_roles=("billing-lead",),
    amend=("amount",),
    escalate=(Escalation(when="input.amount > 10000.0", count=2),),
)


async def test_a_proposal_matching_a_higher_tier_waits_for_more_approvers() -> None:
    runtime = memory_runtime(definition(Recorder(), approval=TIERED))
    small = await runtime.propose(proposal(LARGE, key="small"))
    big = await runtime.propose(proposal({"invoice_id": "INV-3", "amount": 20000}, key="big"))
    assert small.approval is not None and small.approval.approvals_needed == 1
    assert big.approval is not None and big.approval.approvals_needed == 2


async def test_an_amount_amended_into_a_higher_tier_now_needs_a_second_approver() -> None:
    recorder = Recorder()
    runtime = memory_runtime(definition(recorder, approval=TIERED))
    pending = await runtime.propose(proposal(LARGE))
    first = await runtime.decide(pending.run_id, "acme", amend(amount=12000))
    assert first.accepted and first.code == Code.APPROVAL_RECORDED and recorder.count == 0
    assert first.outcome is not None and first.outcome.approval is not None
    assert first.outcome.approval.approvals_needed == 2
    second = await runtime.decide(pending.run_id, "acme", approve(LEAD2))
    assert second.code == Code.SUCCEEDED
    assert recorder.calls[0].input["amount"] == 12000


async def test_a_failing_tier_rule_fails_closed() -> None:
    broken = ApprovalSpec(
        when="true",
        approver_roles=("billing-lead",),
        escalate=(Escalation(when="input.missing > 1.0", count=2),),
    )
    runtime = memory_runtime(definition(Recorder(), approval=broken))
    outcome = await runtime.propose(proposal(LARGE))
    assert outcome.code == Code.POLICY_EVALUATION_ERROR
