"""Random sequences of propose / approve / reject / cancel / expire never break an invariant."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from signoff import ExecutionContext, Principal
from signoff.core.clock import ManualClock
from signoff.core.definition import ApprovalSpec, IdempotencySpec
from signoff.core.registry import ActionRegistry
from signoff.core.run import TERMINAL_STATUSES, ActionRun
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import approve, definition, proposal, reject, stored_run

SCOPED = IdempotencySpec(key="optional", scope="principal")
PRINCIPALS = [
    Principal(id="agent-1", roles=("billing",)),
    Principal(id="agent-2", roles=("billing",)),
    Principal(id="lead-1", roles=("billing", "billing-lead")),
    Principal(id="support", roles=("support",)),
]
APPROVERS = [
    Principal(id="lead-1", roles=("billing-lead",)),
    Principal(id="lead-2", roles=("billing-lead",)),
    Principal(id="clerk", roles=("billing",)),
]


class PipelineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.calls: list[ExecutionContext] = []
        spec = ApprovalSpec(
            when="input.amount > 1000.0",
            approver_roles=("billing-lead",),
            count=2,
            expires_after=timedelta(hours=1),
        )
        self.store = InMemoryStore()
        self.runtime = Runtime(
            ActionRegistry([definition(self._execute, approval=spec, idempotency=SCOPED)]),
            self.store,
            self.clock,
        )
        self.run_ids: list[str] = []
        self.terminal: dict[str, ActionRun] = {}
        self.versions: dict[str, int] = {}

    async def _execute(self, context: ExecutionContext) -> dict[str, Any]:
        self.calls.append(context)
        return {"invoice": context.input["invoice_id"]}

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.loop.close()

    @rule(
        invoice=st.sampled_from(["INV-1", "INV-2"]),
        amount=st.sampled_from([5, 5000, 200_000]),
        key=st.sampled_from(["k1", "k2", "k3", "k4", None]),
        who=st.sampled_from(PRINCIPALS),
        tenant=st.sampled_from(["acme", "globex"]),
    )
    def propose(
        self, invoice: str, amount: int, key: str | None, who: Principal, tenant: str
    ) -> None:
        outcome = self._run(
            self.runtime.propose(
                proposal(
                    {"invoice_id": invoice, "amount": amount}, key=key, principal=who, tenant=tenant
                )
            )
        )
        self.run_ids.append(outcome.run_id)

    @precondition(lambda self: bool(self.run_ids))
    @rule(data=st.data(), approver=st.sampled_from(APPROVERS), vote=st.booleans())
    def decide(self, data: st.DataObject, approver: Principal, vote: bool) -> None:
        run_id = data.draw(st.sampled_from(self.run_ids))
        run = self._run(stored_run(self.store, run_id))
        request = approve(approver) if vote else reject(approver)
        self._run(self.runtime.decide(run_id, run.tenant_id, request))

    @precondition(lambda self: bool(self.run_ids))
    @rule(data=st.data(), who=st.sampled_from(PRINCIPALS))
    def cancel(self, data: st.DataObject, who: Principal) -> None:
        run_id = data.draw(st.sampled_from(self.run_ids))
        run = self._run(stored_run(self.store, run_id))
        self._run(self.runtime.cancel(run_id, run.tenant_id, who))

    @rule(minutes=st.integers(min_value=1, max_value=40))
    def time_passes_and_the_sweeper_runs(self, minutes: int) -> None:
        self.clock.advance(timedelta(minutes=minutes))
        self._run(self.runtime.expire_overdue())

    @invariant()
    def terminal_runs_never_change_and_versions_only_move_forward(self) -> None:
        for run_id in self.run_ids:
            run = self._run(stored_run(self.store, run_id))
            assert run is not None
            previous = self.versions.get(run_id, 0)
            assert run.version >= previous
            self.versions[run_id] = run.version
            if run_id in self.terminal:
                assert run == self.terminal[run_id]
            elif run.status in TERMINAL_STATUSES:
                self.terminal[run_id] = run

    @invariant()
    def versions_advance_by_exactly_one_per_recorded_transition(self) -> None:
        for run_id in self.run_ids:
            run = self._run(stored_run(self.store, run_id))
            events = self._run(self.store.audit.list_for_run(run_id))
            # One commit per write after create; each write appends exactly one audit event.
            writes_after_create = [e for e in events if e.kind in _CAS_KINDS]
            assert run.version == 1 + len(writes_after_create)

    @invariant()
    def at_most_one_executor_call_per_reservation(self) -> None:
        counts = Counter(c.run_id for c in self.calls)
        assert all(n == 1 for n in counts.values())
        per_scope = Counter(
            (c.tenant_id, c.action_id, self._run(stored_run(self.store, c.run_id)).duplicate_scope)
            for c in self.calls
            if self._run(stored_run(self.store, c.run_id)).duplicate_scope is not None
        )
        assert all(n == 1 for n in per_scope.values())

    @invariant()
    def nothing_executes_without_passing_policy_and_quorum(self) -> None:
        for call in self.calls:
            run = self._run(stored_run(self.store, call.run_id))
            assert "billing" in run.principal.roles or "billing-lead" in run.principal.roles
            assert run.input["amount"] <= 100_000
            if run.input["amount"] > 1000:
                assert run.approval is not None
                approvers = {d.approver_id for d in run.approval.approvals()}
                assert len(approvers) >= 2 and run.principal.id not in approvers


_CAS_KINDS = {
    "executed",
    "guard_denied",
    "approval_recorded",
    "approval_rejected",
    "approval_expired",
    "approved_dispatching",
    "resume_refused",
    "cancelled",
    "dispatch_claimed",
}

PipelineMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)
test_random_sequences_never_break_an_invariant = PipelineMachine.TestCase
