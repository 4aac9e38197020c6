"""The audited repair path: an operator re-dispatches a MANUAL_REVIEW run of an idempotent
executor with the same operation id, through resolve, validate, policy and guard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from signoff import ExecutionContext, ExecutionResult, ExecutionStatus, GuardDecision
from signoff.audit_check import check_trail
from signoff.core.codes import Code
from signoff.core.definition import DenyRule, PolicySpec
from signoff.core.identity import Principal
from signoff.core.registry import ActionRegistry
from signoff.core.repair import RepairRequest
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from signoff.executors.http.executor import HttpExecutor
from signoff.store.memory import InMemoryStore
from tests.core.test_retry import CLIENT_TIMEOUT, Payments, payments  # noqa: F401 - fixture
from tests.helpers import AGENT, LEAD, NO_APPROVAL, definition, proposal
from tests.loopback import Loopback

APPROVAL_ROLES = NO_APPROVAL.model_copy(update={"approver_roles": ("billing-lead",)})
ASK = RepairRequest(operator=LEAD, reason="payment system confirmed nothing was refunded twice")


@dataclass
class Flaky:
    """Possibly applied on its first call, fine afterwards; records every operation id."""

    seen: list[str] = field(default_factory=list)

    def __call__(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        self.seen.append(context.operation_id)
        if len(self.seen) == 1:
            return ExecutionResult.possibly_applied_failure("ERP_TIMEOUT", "no answer")
        return {"done": True}


def runtime(executor: Any, store: InMemoryStore | None = None, **overrides: Any) -> Runtime:
    fields: dict[str, Any] = {"approval": APPROVAL_ROLES, "executor_idempotent": True}
    fields.update(overrides)
    return Runtime(ActionRegistry([definition(executor, **fields)]), store or InMemoryStore())


async def _failed(governed: Runtime) -> str:
    outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
    assert (outcome.code, outcome.retry) == ("ERP_TIMEOUT", "MANUAL_REVIEW")
    return outcome.run_id


async def test_an_operator_redispatches_with_the_same_operation_id_as_a_new_linked_run() -> None:
    executor = Flaky()
    governed = runtime(executor)
    run_id = await _failed(governed)

    outcome = await governed.redispatch(run_id, "acme", ASK)

    assert (outcome.status, outcome.code) == (ExecutionStatus.SUCCEEDED, Code.SUCCEEDED)
    assert outcome.run_id != run_id
    assert len(executor.seen) == 2 and executor.seen[0] == executor.seen[1]
    original = await governed.get_run(run_id, "acme")
    repair = await governed.get_run(outcome.run_id, "acme")
    assert original is not None and original.status is RunStatus.FAILED  # terminal, unchanged
    assert repair is not None and repair.repair_of == run_id
    assert repair.operation_id == original.operation_id
    trail = await governed.audit_trail(outcome.run_id, "acme")
    opened = trail[0]
    assert (opened.kind, opened.actor) == ("proposed", LEAD.id)
    assert (opened.data or {})["repair_of"] == run_id
    assert (opened.data or {})["reason"] == ASK.reason
    assert "executed" in [e.kind for e in trail]
    assert [e.kind for e in await governed.audit_trail(run_id, "acme")][-1] == "executed"
    assert check_trail(repair, trail) == []


async def test_a_non_idempotent_executor_is_never_redispatched() -> None:
    executor = Flaky()
    governed = runtime(executor, executor_idempotent=False)
    run_id = await _failed(governed)

    outcome = await governed.redispatch(run_id, "acme", ASK)

    assert (outcome.run_id, outcome.code) == (run_id, Code.REPAIR_NOT_IDEMPOTENT)
    assert len(executor.seen) == 1


async def test_only_a_manual_review_failure_can_be_redispatched() -> None:
    executor = Flaky()
    executor.seen.append("first call already happened")
    governed = runtime(executor)
    done = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    outcome = await governed.redispatch(done.run_id, "acme", ASK)

    assert done.status is ExecutionStatus.SUCCEEDED
    assert outcome.code == Code.REPAIR_NOT_APPLICABLE
    assert len(executor.seen) == 2


@pytest.mark.parametrize(
    "operator",
    [
        AGENT,
        Principal(id="someone", roles=("billing",)),
        Principal(id="agent-1", roles=("billing-lead",)),
    ],
)
async def test_only_an_approver_who_did_not_propose_may_redispatch(operator: Principal) -> None:
    executor = Flaky()
    governed = runtime(executor)
    run_id = await _failed(governed)

    outcome = await governed.redispatch(run_id, "acme", RepairRequest(operator, "retry"))

    assert outcome.code == Code.APPROVER_NOT_ELIGIBLE
    assert len(executor.seen) == 1


async def test_the_current_policy_and_the_guard_decide_again_before_a_redispatch() -> None:
    executor = Flaky()
    store = InMemoryStore()
    run_id = await _failed(runtime(executor, store))
    deny = PolicySpec(deny=(DenyRule(when="input.amount > 5.0", code="TOO_MUCH"),))
    stricter = runtime(executor, store, policy=deny)
    guarded = runtime(executor, store, guard=lambda _: GuardDecision.deny("INVOICE_LOCKED"))

    by_policy = await stricter.redispatch(run_id, "acme", ASK)
    by_guard = await guarded.redispatch(run_id, "acme", ASK)

    assert (by_policy.status, by_policy.code) == (
        ExecutionStatus.DENIED,
        Code.POLICY_REVALIDATION_DENIED,
    )
    assert (by_guard.status, by_guard.code) == (ExecutionStatus.DENIED, "INVOICE_LOCKED")
    assert len(executor.seen) == 1


async def test_another_tenants_run_cannot_be_redispatched() -> None:
    governed = runtime(Flaky())
    run_id = await _failed(governed)

    outcome = await governed.redispatch(run_id, "other-tenant", ASK)

    assert outcome.code == Code.ACTION_RUN_NOT_FOUND


async def test_a_timed_out_payment_redispatched_by_an_operator_pays_once_with_one_key(
    payments: tuple[Payments, Loopback],  # noqa: F811
) -> None:
    server, loopback = payments
    executor = HttpExecutor(url=loopback.url("/payments"), timeout=CLIENT_TIMEOUT)
    governed = runtime(executor)
    failed = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    repaired = await governed.redispatch(failed.run_id, "acme", ASK)

    assert (failed.code, failed.retry) == ("HTTP_TIMEOUT", "MANUAL_REVIEW")
    assert (repaired.status, repaired.output) == (ExecutionStatus.SUCCEEDED, {"payment": "pay_1"})
    assert len(server.applied) == 1
    assert len(server.requests) == 2 and len(set(server.requests)) == 1
