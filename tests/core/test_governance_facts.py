"""Each governance fact has one owner in the core; the surfaces and tools ask it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from signoff import Code, ExecutionStatus
from signoff.cli.check import approval_rule
from signoff.core import admission, substance
from signoff.core.answers import outcome_of, stored_statuses_for
from signoff.core.approvals import is_overdue
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec, Effect, Risk, default_approval_rule
from signoff.core.identity import Channel, ProposerType
from signoff.core.policy import PolicyInput
from signoff.core.registry import compile_action
from signoff.core.run import MAX_REASON_CHARS, ApprovalDecision, ApprovalVote, RunStatus
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.manifest import load_manifests
from tests.helpers import (
    AGENT,
    LARGE,
    LEAD,
    LEAD2,
    Recorder,
    approve,
    definition,
    memory_runtime,
    proposal,
)

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_reason_limit_is_the_models_own() -> None:
    ApprovalDecision(
        approver_id="a", decision=ApprovalVote.APPROVE, reason="x" * MAX_REASON_CHARS, at=AT
    )
    with pytest.raises(ValueError, match="at most"):
        ApprovalDecision(
            approver_id="a",
            decision=ApprovalVote.APPROVE,
            reason="x" * (MAX_REASON_CHARS + 1),
            at=AT,
        )


async def test_approvals_received_and_overdue_read_the_same_on_every_side() -> None:
    clock = ManualClock()
    spec = ApprovalSpec(when="true", approver_roles=("billing-lead",), count=3)
    runtime = memory_runtime(definition(Recorder(), approval=spec), clock=clock)
    pending = await runtime.propose(proposal(LARGE))
    await runtime.decide(pending.run_id, "acme", approve(LEAD))
    await runtime.decide(pending.run_id, "acme", approve(LEAD2))
    run = await runtime.get_run(pending.run_id, "acme")
    assert run is not None and run.approval is not None
    assert len(substance.standing_approvers(run)) == 2
    assert outcome_of(run).approval is not None
    summary = outcome_of(run).approval
    assert summary is not None and summary.approvals_received == 2
    assert not is_overdue(run, clock.now())
    assert run.approval.expires_at is not None
    assert is_overdue(run, run.approval.expires_at)
    clock.advance(timedelta(hours=25))
    expired = await runtime.get(pending.run_id, "acme")
    assert expired is not None and expired.code == Code.APPROVAL_EXPIRED


def test_every_outcome_status_lists_the_stored_states_it_can_come_from() -> None:
    for stored in RunStatus:
        if stored is RunStatus.WAITING_APPROVAL:
            shown = ExecutionStatus.PENDING_APPROVAL
        elif not stored.is_terminal:
            shown = ExecutionStatus.ACCEPTED
        else:
            continue
        assert stored in stored_statuses_for(shown)
    assert stored_statuses_for(ExecutionStatus.SUCCEEDED) == {RunStatus.SUCCEEDED}


@pytest.mark.parametrize(
    ("effect", "risk", "stops"),
    [
        (Effect.READ_ONLY, Risk.LOW, False),
        (Effect.READ_ONLY, Risk.CRITICAL, True),
        (Effect.WRITE, Risk.HIGH, True),
    ],
)
def test_the_default_approval_rule_is_described_once_and_matches_what_it_does(
    effect: Effect, risk: Risk, stops: bool
) -> None:
    action = compile_action(
        definition(Recorder(), effect=effect, risk=risk, approval=ApprovalSpec())
    )
    request = PolicyInput(
        principal=AGENT,
        tenant_id="acme",
        proposer_type=ProposerType.AGENT,
        channel=Channel.MCP,
        input=LARGE,
        now=AT,
    )
    verdict = admission.admit(action, request, LARGE, "k")
    assert verdict.decision is not None
    assert verdict.decision.approval_required is stops
    assert (default_approval_rule(effect, risk) is not None) is stops


def test_signoff_check_describes_a_default_rule_with_the_cores_words() -> None:
    loaded = load_manifests(DEMO_MANIFESTS)
    defaulted = [a for a in loaded.actions if a.manifest.spec.approval is None]
    for action in defaulted:
        words = default_approval_rule(action.manifest.spec.effect, action.manifest.spec.risk)
        assert (words or "none") in approval_rule(action)


def test_the_stage_order_refuses_a_bad_key_before_a_bad_input_before_policy() -> None:
    action = compile_action(definition(Recorder()))
    request = PolicyInput(
        principal=AGENT.model_copy(update={"roles": ("nobody",)}),
        tenant_id="acme",
        proposer_type=ProposerType.AGENT,
        channel=Channel.MCP,
        input=LARGE,
        now=AT,
    )
    assert admission.admit(action, request, {}, None).stage is admission.Stage.KEY
    assert admission.admit(action, request, {}, "k").stage is admission.Stage.VALIDATION
    assert admission.admit(action, request, {}, None, check_keys=False).refusal is not None
    policy = admission.admit(action, request, LARGE, "k")
    assert policy.stage is admission.Stage.POLICY
    assert policy.refusal is not None and policy.refusal.code == Code.POLICY_DENIED
