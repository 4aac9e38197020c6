"""Re-dispatch is single-flight per run, chains to the original, and is decided under the
action's own approval rule (contract §12) — on every store, raced at a barrier."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from signoff import ExecutionContext, ExecutionResult, Principal
from signoff.core.clock import ManualClock
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.ledger import RunLedger
from signoff.core.registry import ActionRegistry
from signoff.core.repair import RepairRequest
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from tests.helpers import LEAD, NO_APPROVAL, approve, definition, proposal, reject
from tests.store.conftest import Backend

ROLES = NO_APPROVAL.model_copy(update={"approver_roles": ("billing-lead",)})
TWO = ROLES.model_copy(update={"count": 2})
LEAD3 = Principal(id="lead-3", roles=("billing-lead",))


class Unsure:
    """Possibly applied on the calls listed, fine otherwise; records every operation id."""

    def __init__(self, unsure: frozenset[int] = frozenset({1})) -> None:
        self.unsure = unsure
        self.seen: list[str] = []

    def __call__(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        self.seen.append(context.operation_id)
        if len(self.seen) in self.unsure:
            return ExecutionResult.possibly_applied_failure("ERP_TIMEOUT", "no answer")
        return {"done": True}


def ask(operator: Principal = LEAD) -> RepairRequest:
    return RepairRequest(operator, "the ERP confirmed nothing happened")


async def governed(backend: Backend, executor: Unsure, approval: Any = ROLES) -> Runtime:
    action = definition(executor, approval=approval, executor_idempotent=True)
    return Runtime(ActionRegistry([action]), await backend.open(), clock=ManualClock())


async def failed(runtime: Runtime, tenant: str) -> str:
    outcome = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}, tenant=tenant))
    assert outcome.code == "ERP_TIMEOUT" and outcome.retry == "MANUAL_REVIEW"
    return outcome.run_id


async def test_concurrent_redispatches_of_one_run_make_one_repair(
    backend: Backend, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six operators re-dispatch one run at once, released together right before the unit
    that reserves the repair: one repair runs, the executor is called once more."""
    executor = Unsure()
    runtimes = [await governed(backend, executor) for _ in range(6)]
    run_id = await failed(runtimes[0], tenant)
    barrier = asyncio.Barrier(6)
    create = RunLedger.create

    async def at_the_barrier(self: RunLedger, run: ActionRun, *args: Any, **kw: Any) -> ActionRun:
        if run.repair_of is not None and kw.get("scope") is not None:
            await barrier.wait()
        return await create(self, run, *args, **kw)

    monkeypatch.setattr(RunLedger, "create", at_the_barrier)
    outcomes = await asyncio.gather(*(r.redispatch(run_id, tenant, ask()) for r in runtimes))
    codes = sorted(o.code for o in outcomes)
    assert codes.count(Code.SUCCEEDED) == 1, codes
    assert set(codes) - {Code.SUCCEEDED} <= {Code.REPAIR_IN_PROGRESS, Code.REPAIR_NOT_APPLICABLE}
    assert len(executor.seen) == 2 and len(set(executor.seen)) == 1


async def test_a_run_is_redispatched_once_and_a_failed_repair_chains_to_the_original(
    backend: Backend, tenant: str
) -> None:
    executor = Unsure(frozenset({1, 2}))
    runtime = await governed(backend, executor)
    run_id = await failed(runtime, tenant)
    first = await runtime.redispatch(run_id, tenant, ask())
    assert first.code == "ERP_TIMEOUT" and first.retry == "MANUAL_REVIEW"
    again = await runtime.redispatch(run_id, tenant, ask())
    assert again.code == Code.REPAIR_NOT_APPLICABLE  # re-dispatch the repair instead
    second = await runtime.redispatch(first.run_id, tenant, ask())
    assert second.status is ExecutionStatus.SUCCEEDED
    chained = await runtime.get_run(second.run_id, tenant)
    assert chained is not None and (chained.repair_of, chained.repairs) == (run_id, first.run_id)
    assert len(executor.seen) == 3 and len(set(executor.seen)) == 1  # one operation id


async def test_a_repair_of_an_action_needing_two_approvers_waits_for_the_second(
    backend: Backend, tenant: str
) -> None:
    executor = Unsure()
    runtime = await governed(backend, executor, approval=TWO)
    run_id = await failed(runtime, tenant)
    asked = await runtime.redispatch(run_id, tenant, ask(LEAD))
    assert asked.code == Code.APPROVAL_REQUIRED and asked.run_id != run_id
    assert asked.approval is not None and asked.approval.approvals_received == 1
    assert len(executor.seen) == 1  # one approver alone re-dispatches nothing
    lone = await runtime.decide(asked.run_id, tenant, approve(LEAD))
    assert lone.code == Code.APPROVAL_ALREADY_DECIDED
    second = await runtime.decide(asked.run_id, tenant, approve(LEAD3))
    assert second.code == Code.SUCCEEDED
    assert len(executor.seen) == 2 and len(set(executor.seen)) == 1


async def test_a_rejected_repair_gives_the_run_back_for_another_request(
    backend: Backend, tenant: str
) -> None:
    executor = Unsure()
    runtime = await governed(backend, executor, approval=TWO)
    run_id = await failed(runtime, tenant)
    asked = await runtime.redispatch(run_id, tenant, ask(LEAD))
    busy = await runtime.redispatch(run_id, tenant, ask(LEAD3))
    assert busy.code == Code.REPAIR_IN_PROGRESS
    rejected = await runtime.decide(asked.run_id, tenant, reject(LEAD3, "not yet"))
    assert rejected.code == Code.APPROVAL_REJECTED
    anew = await runtime.redispatch(run_id, tenant, ask(LEAD3))
    assert anew.code == Code.APPROVAL_REQUIRED and len(executor.seen) == 1
