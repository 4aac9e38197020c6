"""The cross-feature model test: random sequences of every feature against the real ``Runtime``
on the memory store, SQLite and PostgreSQL, with the invariants that tie the features together
checked after every step (contract §12).

Features driven: proposals (sync with in-run retries, deferred), duplicates by key, amendments,
approvals (quorum of two, fresh and stale views), rejections, cancellations, expiry, cumulative
limits under pressure (a deny sum and an approval count), completions of deferred work, operator
re-dispatch (its own quorum), restarts with recovery, and housekeeping dispatch.

Invariants (each guards a rule; the resolving note of issue 23 shows each failing once its rule
is broken):

- ``limits_follow_what_runs``: each limit's reported usage equals the model's count and sum of
  the runs that hold it (waiting, running or run — as they will run now) in the window; a deny
  limit's usage never passes its max, and what the bank applied never passes the usage;
- ``what_ran_was_approved``: every executor call carried the input that will run of its run, and
  a call that needed approval ran only on a standing quorum whose digests all equal the call;
- ``what_ran_was_confirmed``: a payment above the confirmation line ran only on its requester's
  accepted confirmation (channel ``elicitation``) of exactly what ran, and a run whose requester
  declined is refused with ``CONFIRMATION_DECLINED`` and never runs (treating a decline as an
  accept in ``confirmation.py`` makes it fail);
- ``one_effect_per_operation``: the bank applied each operation once, every call of one
  operation id carried the same input for the same original run, and no run applied two;
- ``the_trail_verifies``: ``audit verify`` of the tenant finds nothing;
- ``every_anchored_runs_receipt_verifies``: every run that had finished when a checkpoint was
  signed gets a receipt (values revealed), and the receipt verifies with no database
  (``docs/receipts.md``);
- ``no_secret_reaches_a_caller``: no outcome or stored result carries the planted secret;
- ``every_row_reads_back``: every run the model saw reads back, and the store skipped no row.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from signoff import ExecutionContext, ExecutionResult, Principal
from signoff.audit.checkpoints import checkpoint_heads
from signoff.audit.keys import ED25519, AuditKey, KeyRing
from signoff.audit.receipt import make_receipt
from signoff.audit.receipt_check import ring_check, verify_receipt
from signoff.audit.verify import verify_trail
from signoff.core import limit_stage, substance
from signoff.core.clock import ManualClock
from signoff.core.codes import Code
from signoff.core.confirmer import ConfirmationAnswer, ConfirmationRequest
from signoff.core.decisions import approver_refusal
from signoff.core.definition import (
    ActionDefinition,
    ApprovalSpec,
    ConfirmSpec,
    ExecutorMode,
    IdempotencySpec,
    PolicySpec,
    RetrySpec,
)
from signoff.core.identity import Channel
from signoff.core.limits import LimitSpec, OnExceed
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.replay import ReplayScope, replay
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun, ApprovalVote, RunStatus
from signoff.core.runtime import DecisionRequest, RepairRequest, Runtime
from signoff.store.history import MemoryHistory, open_history
from signoff.store.memory import InMemoryStore
from signoff.store.sql import open_sql_store
from tests.helpers import proposal
from tests.store.conftest import POSTGRES_ENV, scratch_database

SECRET = "S3cr3tPassw0rd-planted"
WINDOW = timedelta(hours=1)
SPEND_MAX = 20000.0
CALLS_MAX = 6
AGENTS = [Principal(id="agent-1", roles=("billing",)), Principal(id="agent-2", roles=("billing",))]
LEADS = [Principal(id=f"lead-{n}", roles=("billing-lead",)) for n in (1, 2, 3)]
LIMIT_CHECKS = frozenset({"dispatching", "approval_requested", "approved_dispatching"})
HOLDING = frozenset(
    {RunStatus.WAITING_APPROVAL, RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED}
)
SPEND = LimitSpec(
    name="spend", window=WINDOW, sum="input.amount", max=SPEND_MAX, on_exceed=OnExceed.DENY
)
CALLS = LimitSpec(name="calls", window=WINDOW, count=CALLS_MAX)
CONFIRM_ABOVE = 9000.0
"""Payments above this also need the requester's own confirmation (``approval.confirm``)."""


@dataclass
class Human:
    """The requester's host: answers ``answer`` (``None``: no answer now)."""

    answer: ConfirmationAnswer | None
    available: bool = True

    async def ask(self, request: ConfirmationRequest) -> ConfirmationAnswer | None:
        return self.answer


PAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "pattern": "^INV-[0-9]+$"},
        "amount": {"type": "number", "minimum": 0},
        "mode": {"enum": ["ok", "flaky", "lost", "boom"]},
    },
    "required": ["invoice_id", "amount", "mode"],
    "additionalProperties": False,
}


@dataclass
class Bank:
    """The payment system: idempotent by operation id, answering by the input's ``mode`` —
    ``flaky`` times out before applying once, ``lost`` applies and then times out twice,
    ``boom`` raises an error that carries a secret."""

    clock: ManualClock
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    applied: dict[str, tuple[str, float, datetime]] = field(default_factory=dict)

    async def pay(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        op = context.operation_id
        self.calls.append((context.run_id, op, dict(context.input)))
        seen = sum(1 for _, o, _ in self.calls if o == op)
        mode = context.input["mode"]
        if mode == "boom":
            raise RuntimeError(f"connect to postgresql://erp:{SECRET}@db.internal/ledger")
        if mode == "flaky" and seen == 1:
            return ExecutionResult.possibly_applied_failure("BANK_TIMEOUT", "no answer")
        if op not in self.applied:
            self.applied[op] = (context.run_id, float(context.input["amount"]), self.clock.now())
        if mode == "lost" and seen <= 2:
            return ExecutionResult.possibly_applied_failure("BANK_TIMEOUT", "no answer")
        return {"paid": context.input["amount"]}

    async def ship(self, context: ExecutionContext) -> dict[str, Any]:
        self.calls.append((context.run_id, context.operation_id, dict(context.input)))
        if context.input["mode"] == "boom":
            raise RuntimeError(f"carrier API key {SECRET} rejected at /srv/carrier.py")
        return {"ticket": context.operation_id}


def actions(bank: Bank) -> list[ActionDefinition]:
    common: dict[str, Any] = {
        "effect": "financial",
        "risk": "high",
        "input_schema": PAY_SCHEMA,
        "resource": "'invoice/' + input.invoice_id",
        "idempotency": IdempotencySpec(key="optional", scope="principal"),
        "policy": PolicySpec(roles=("billing",)),
    }
    pay = ActionDefinition(
        id="invoice.pay",
        approval=ApprovalSpec(
            when="input.amount > 1000.0",
            approver_roles=("billing-lead",),
            count=2,
            expires_after=WINDOW,
            amend=("amount",),
            confirm=ConfirmSpec(when=f"input.amount > {CONFIRM_ABOVE}"),
        ),
        limits=(SPEND, CALLS),
        executor=bank.pay,
        executor_idempotent=True,
        retry=RetrySpec(attempts=2, backoff=timedelta(0)),
        **common,
    )
    ship = ActionDefinition(
        id="invoice.ship",
        approval=ApprovalSpec(when="false", approver_roles=("billing-lead",)),
        executor=bank.ship,
        mode=ExecutorMode.DEFERRED,
        **common,
    )
    return [pay, ship]


async def no_sleep(_: float) -> None:
    return None


class CrossFeatureMachine(RuleBasedStateMachine):
    """One tenant's life on one store; ``open_store`` is set per store kind below."""

    store_kind = "memory"
    url: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.bank = Bank(self.clock)
        self.registry = ActionRegistry(actions(self.bank))
        self.tenant = f"model-{uuid.uuid4().hex[:10]}"
        self.directory: str | None = None
        self.store: Store = self._run(self._open())
        self.runtime = self._runtime()
        self.run_ids: list[str] = []
        self.outcomes: list[ActionOutcome] = []
        self.keys = 0
        self.declined: set[str] = set()
        """Runs whose requester declined (or cancelled) the confirmation they were asked."""
        signer = Ed25519PrivateKey.generate()
        self.ring = KeyRing(
            {"model": AuditKey("model", ED25519, private=signer, public=signer.public_key())},
            "model",
        )
        self.anchored: set[str] = set()  # finished when a checkpoint was signed
        self.receipted: set[str] = set()

    # ------------------------------------------------------------------ plumbing
    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _open(self) -> Store:
        if self.store_kind == "memory":
            return InMemoryStore()
        if self.store_kind == "sqlite":
            if self.directory is None:
                self.directory = tempfile.mkdtemp(prefix="signoff-model-")
            return await open_sql_store(f"sqlite+aiosqlite:///{self.directory}/model.db")
        assert self.url is not None
        return await open_sql_store(self.url)

    def _runtime(self) -> Runtime:
        return Runtime(
            self.registry, self.store, clock=self.clock, instance_id="model", sleep=no_sleep
        )

    def teardown(self) -> None:
        self._run(self.runtime.drain())
        self._run(self.store.close())
        self.loop.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _saw(self, outcome: ActionOutcome | None) -> None:
        if outcome is not None:
            event(f"{outcome.action or '-'} {outcome.code}")
            self.outcomes.append(outcome)
            if outcome.run_id not in self.run_ids and outcome.code != Code.ACTION_RUN_NOT_FOUND:
                self.run_ids.append(outcome.run_id)

    async def _runs(self) -> list[ActionRun]:
        runs: list[ActionRun] = []
        cursor: str | None = None
        while True:
            async with self.store.unit() as unit:
                page = await unit.runs.list(tenant_id=self.tenant, limit=200, before_run_id=cursor)
            runs.extend(page)
            if len(page) < 200:
                return runs
            cursor = page[-1].run_id

    def _stored(self) -> list[ActionRun]:
        found: list[ActionRun] = self._run(self._runs())
        return found

    def _where(self, status: RunStatus, action: str | None = None) -> list[ActionRun]:
        return [
            r
            for r in self._stored()
            if r.status is status and (action is None or r.action_id == action)
        ]

    # --------------------------------------------------------------------- rules
    @initialize(amounts=st.lists(st.sampled_from([900, 5000, 9500, 15000]), max_size=3))
    def opened(self, amounts: list[int]) -> None:
        """The tenant's day starts with a few payments already waiting for approval."""
        self._run(self.runtime.heartbeat())
        for amount in amounts:
            self.keys += 1
            data = {"invoice_id": f"INV-{self.keys}", "amount": amount, "mode": "ok"}
            self._saw(
                self._run(
                    self.runtime.propose(
                        proposal(data, f"k{self.keys}", AGENTS[0], self.tenant, "invoice.pay")
                    )
                )
            )

    @rule(
        agent=st.sampled_from(AGENTS),
        amount=st.sampled_from([10, 900, 5000, 9500, 15000]),
        mode=st.sampled_from(["ok", "ok", "flaky", "lost", "lost", "boom"]),
        reuse=st.booleans(),
        answer=st.sampled_from([*ConfirmationAnswer, ConfirmationAnswer.ACCEPT, None]),
    )
    def propose_a_payment(
        self,
        agent: Principal,
        amount: int,
        mode: str,
        reuse: bool,
        answer: ConfirmationAnswer | None,
    ) -> None:
        if not reuse:
            self.keys += 1
        key = f"k{self.keys}"
        data = {"invoice_id": f"INV-{self.keys}", "amount": amount, "mode": mode}
        paying = proposal(data, key, agent, self.tenant, "invoice.pay")
        outcome = self._run(self.runtime.propose(paying, Human(answer)))
        asked = amount > CONFIRM_ABOVE and answer not in (None, ConfirmationAnswer.ACCEPT)
        if asked and outcome.run_id:
            self.declined.add(outcome.run_id)
        self._saw(outcome)

    @rule(data=st.data(), accept=st.booleans(), stranger=st.booleans())
    def the_requester_answers_later(
        self, data: st.DataObject, accept: bool, stranger: bool
    ) -> None:
        """A pending confirmation answered later: only its own principal is heard."""
        waiting = [
            r
            for r in self._where(RunStatus.WAITING_APPROVAL)
            if r.approval is not None and r.approval.awaits_confirmation
        ]
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        who = next(a for a in AGENTS if (a.id != run.principal.id) == stranger)
        answer = ConfirmationAnswer.ACCEPT if accept else ConfirmationAnswer.DECLINE
        outcome = self._run(self.runtime.confirm(run.run_id, self.tenant, who, answer))
        if stranger:
            assert outcome.code == Code.ACTION_RUN_NOT_FOUND
            return
        if not accept:
            self.declined.add(run.run_id)
        self._saw(outcome)

    @rule(agent=st.sampled_from(AGENTS), mode=st.sampled_from(["ok", "ok", "boom"]))
    def propose_a_shipment(self, agent: Principal, mode: str) -> None:
        self.keys += 1
        data = {"invoice_id": f"INV-{self.keys}", "amount": 1, "mode": mode}
        self._saw(
            self._run(
                self.runtime.propose(
                    proposal(data, f"s{self.keys}", agent, self.tenant, "invoice.ship")
                )
            )
        )

    @rule(
        data=st.data(),
        approver=st.sampled_from(LEADS),
        approve=st.booleans(),
        amend=st.sampled_from([None, None, 500, 9500, 19000]),
        stale=st.booleans(),
    )
    def decide(
        self,
        data: st.DataObject,
        approver: Principal,
        approve: bool,
        amend: int | None,
        stale: bool,
    ) -> None:
        waiting = self._where(RunStatus.WAITING_APPROVAL)
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        shown = run.version - 1 if stale and run.version > 1 else run.version
        request = DecisionRequest(
            approver=approver,
            vote=ApprovalVote.APPROVE if approve else ApprovalVote.REJECT,
            reason="model",
            expected_version=shown,
            amendments={"amount": amend} if amend is not None and approve else None,
        )
        result = self._run(self.runtime.decide(run.run_id, self.tenant, request))
        event(f"decision {result.code}{' amending' if request.amendments else ''}")
        self._saw(result.outcome)
        if shown != run.version:
            # A decision on a stale view never counts and never costs the approver their seat:
            # nothing is recorded, and the approver may decide on the fresh view as before.
            assert result.code == Code.APPROVAL_RUN_CHANGED and not result.accepted
            again = self._run(self.runtime.get_run(run.run_id, self.tenant))
            assert again is not None and again.version == run.version
            assert again.approval == run.approval and again.status is run.status
            assert approver_refusal(again, approver) == approver_refusal(run, approver)

    @rule(data=st.data(), approver=st.sampled_from(LEADS))
    def an_approver_approves_what_they_see(self, data: st.DataObject, approver: Principal) -> None:
        """The common case, drawn more often so that quorums complete."""
        waiting = self._where(RunStatus.WAITING_APPROVAL)
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        request = DecisionRequest(
            approver=approver, vote=ApprovalVote.APPROVE, expected_version=run.version
        )
        result = self._run(self.runtime.decide(run.run_id, self.tenant, request))
        event(f"approval {result.code}")
        self._saw(result.outcome)

    @rule(data=st.data(), approver=st.sampled_from(LEADS), amount=st.sampled_from([500, 9500]))
    def an_approver_amends_what_they_see(
        self, data: st.DataObject, approver: Principal, amount: int
    ) -> None:
        """An amendment that fits the limits, on a fresh view: drawn on its own so that amended
        runs are stored, approved and executed often enough for the invariants to judge them."""
        waiting = [
            r
            for r in self._where(RunStatus.WAITING_APPROVAL)
            if r.action_id == "invoice.pay" and r.repair_of is None
        ]
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        request = DecisionRequest(
            approver=approver,
            vote=ApprovalVote.APPROVE,
            expected_version=run.version,
            amendments={"amount": amount},
        )
        result = self._run(self.runtime.decide(run.run_id, self.tenant, request))
        event(f"amendment {result.code}")
        self._saw(result.outcome)
        if result.accepted:
            stored = self._run(self.runtime.get_run(run.run_id, self.tenant))
            assert stored is not None and substance.will_run(stored)["amount"] == amount
            event("an amended run is stored")

    @rule(data=st.data())
    def a_second_approver_confirms_a_repair(self, data: st.DataObject) -> None:
        """A re-dispatch waits for the action's second approver: drawn on its own so that
        repairs run often enough to matter."""
        waiting = [r for r in self._where(RunStatus.WAITING_APPROVAL) if r.repair_of is not None]
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        decided = {d.approver_id for d in substance.standing(run)}
        approver = next(lead for lead in LEADS if lead.id not in decided)
        request = DecisionRequest(
            approver=approver, vote=ApprovalVote.APPROVE, expected_version=run.version
        )
        result = self._run(self.runtime.decide(run.run_id, self.tenant, request))
        event(f"repair {result.code}")
        self._saw(result.outcome)

    @rule(data=st.data())
    def the_agent_cancels(self, data: st.DataObject) -> None:
        waiting = self._where(RunStatus.WAITING_APPROVAL) + self._where(RunStatus.WAITING_EXTERNAL)
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        self._saw(self._run(self.runtime.cancel(run.run_id, self.tenant, run.principal)))

    @rule(minutes=st.sampled_from([5, 25, 70]))
    def time_passes(self, minutes: int) -> None:
        self.clock.advance(timedelta(minutes=minutes))
        self._run(self.runtime.heartbeat())
        self._run(self.runtime.expire_overdue())
        self._run(self.runtime.dispatch_approved())

    @rule(data=st.data(), succeed=st.booleans())
    def the_carrier_completes(self, data: st.DataObject, succeed: bool) -> None:
        waiting = self._where(RunStatus.WAITING_EXTERNAL)
        if not waiting:
            return
        run = data.draw(st.sampled_from(waiting))
        assert run.attempt_token is not None
        result = (
            ExecutionResult.succeeded({"delivered": True})
            if succeed
            else ExecutionResult.permanent_failure("CARRIER_REFUSED", "no such address")
        )
        self._saw(self._run(self.runtime.complete(run.run_id, run.attempt_token, result)).outcome)

    @rule(data=st.data(), operator=st.sampled_from(LEADS))
    def an_operator_redispatches(self, data: st.DataObject, operator: Principal) -> None:
        failed = [
            r
            for r in self._where(RunStatus.FAILED, "invoice.pay")
            if r.result is not None and r.result.retry == "MANUAL_REVIEW"
        ]
        if not failed:
            return
        run = data.draw(st.sampled_from(failed))
        request = RepairRequest(operator, "the bank shows no double payment")
        self._saw(self._run(self.runtime.redispatch(run.run_id, self.tenant, request)))

    @rule()
    def a_checkpoint_is_signed(self) -> None:
        """Housekeeping (or cron) signs the tenant's chain head: every run finished by now can
        have its receipt."""
        self._run(checkpoint_heads(self.store, self.ring, self.clock.now(), self.tenant))
        self.anchored |= {r.run_id for r in self._stored() if r.is_terminal}

    @rule()
    def the_process_restarts(self) -> None:
        """A new process on the same database (memory: the same store, a new runtime): recovery
        settles what the old one left."""
        self._run(self.runtime.drain())
        if self.store_kind != "memory":
            self._run(self.store.close())
            self.store = self._run(self._open())
        self.runtime = self._runtime()
        self._run(self.runtime.recover())

    # ---------------------------------------------------------------- invariants
    @invariant()
    def limits_follow_what_runs(self) -> None:
        runs = self._stored()
        now = self.clock.now()
        for agent in AGENTS:
            holding = [
                r
                for r in runs
                if r.action_id == "invoice.pay"
                and r.principal.id == agent.id
                and r.status in HOLDING
                and r.duplicate_of is None
                and r.repair_of is None
                and self._checked_at(r) > now - WINDOW
            ]
            usages = self._run(
                self.runtime.limit_usage("invoice.pay", self.tenant, principal_id=agent.id)
            )
            assert usages is not None
            by_name = {u.check.spec.name: u for u in usages}
            spent = sum(float(substance.will_run(r)["amount"]) for r in holding)
            assert by_name["spend"].total == pytest.approx(spent), (holding, by_name["spend"])
            assert by_name["calls"].count == len(holding)
            assert by_name["spend"].total <= SPEND_MAX
            applied = sum(
                amount
                for run_id, amount, at in self.bank.applied.values()
                if at > now - WINDOW and self._proposer(runs, run_id) == agent.id
            )
            assert applied <= by_name["spend"].total + 1e-9

    def _checked_at(self, run: ActionRun) -> datetime:
        """When the run's limits were last checked, read from its trail: the proposal's unit,
        an amendment, the dispatch after approval."""
        trail = self._run(self.runtime.audit_trail(run.run_id, self.tenant))
        checked = [
            e.at
            for e in trail
            if e.kind in LIMIT_CHECKS or (e.data is not None and "amended" in e.data)
        ]
        return max(checked, default=run.created_at)

    @staticmethod
    def _proposer(runs: list[ActionRun], run_id: str) -> str | None:
        return next((r.principal.id for r in runs if r.run_id == run_id), None)

    @invariant()
    def what_ran_was_approved(self) -> None:
        runs = {r.run_id: r for r in self._stored()}
        pay = self.registry.resolve("invoice.pay")
        assert pay is not None
        for run_id, _, sent in self.bank.calls:
            run = runs[run_id]
            assert sent == substance.will_run(run), (sent, run)
            if run.action_id != "invoice.pay" or run.approval is None:
                continue
            standing = [d for d in substance.standing(run) if d.decision is ApprovalVote.APPROVE]
            approvers = {d.approver_id for d in standing} - {run.principal.id}
            assert len(approvers) >= 2, run
            digest = limit_stage.digest_of(pay, run, revision=run.approval.revision)
            assert all(d.digest == digest for d in standing), run

    @invariant()
    def what_ran_was_confirmed(self) -> None:
        """Every payment above the confirmation line ran only on its requester's own accepted
        confirmation of exactly what ran (a repair: its original's)."""
        runs = {r.run_id: r for r in self._stored()}
        for run_id in self.declined:
            said_no = runs[run_id]
            if said_no.approval is not None and said_no.approval.confirmation is not None:
                assert said_no.result is not None, said_no  # asked, declined: refused at once
                assert said_no.result.code == Code.CONFIRMATION_DECLINED, said_no
        for run_id, _, sent in self.bank.calls:
            run = runs[run_id]
            original = runs.get(run.repair_of, run) if run.repair_of else run
            assert original.run_id not in self.declined, original  # the human said no
            if run.action_id != "invoice.pay" or float(sent["amount"]) <= CONFIRM_ABOVE:
                continue
            state = original.approval
            confirmation = state.confirmation if state is not None else None
            assert confirmation is not None and confirmation.accepted, original
            decision = confirmation.decision
            assert decision is not None and decision.approver_id == original.principal.id
            assert decision.channel is Channel.ELICITATION
            assert decision.digest == substance.digest(sent), (decision, sent)

    @invariant()
    def one_effect_per_operation(self) -> None:
        runs = {r.run_id: r for r in self._stored()}
        by_op: dict[str, set[tuple[str, str]]] = {}
        for run_id, op, sent in self.bank.calls:
            root = runs[run_id].repair_of or run_id
            by_op.setdefault(op, set()).add((root, repr(sorted(sent.items()))))
        assert all(len(seen) == 1 for seen in by_op.values()), by_op
        roots = [runs[run_id].repair_of or run_id for run_id, _, _ in self.bank.applied.values()]
        assert len(roots) == len(set(roots)), roots

    @invariant()
    def the_trail_verifies(self) -> None:
        report = self._run(verify_trail(self.store, tenant_id=self.tenant))
        assert [p.line() for p in report.problems] == []

    @invariant()
    def every_anchored_runs_receipt_verifies(self) -> None:
        for run_id in sorted(self.anchored - self.receipted):
            receipt = self._run(
                make_receipt(self.store, run_id, self.ring, self.clock.now(), reveal=True)
            )
            summary = verify_receipt(receipt, ring_check(self.ring))
            event(f"receipt of a {summary.status} run, {summary.decisions} decisions")
            self.receipted.add(run_id)

    @invariant()
    def replaying_the_history_changes_nothing(self) -> None:
        """The history replayed against the definitions it ran under decides every run as it
        was decided: the replay's stages and its rebuilt limit usage are the pipeline's."""
        report = self._run(self._replay())
        record = report.record()
        assert report.changed == 0, record["actions"]
        assert report.replayed == len([r for r in self._stored() if r.repair_of is None])

    async def _replay(self) -> Any:
        if isinstance(self.store, InMemoryStore):
            history: Any = MemoryHistory(self.store)
        else:
            assert self.url is not None or self.directory is not None
            url = self.url or f"sqlite+aiosqlite:///{self.directory}/model.db"
            history = await open_history(url)
        try:
            return await replay(history, self.registry, ReplayScope(tenant_id=self.tenant))
        finally:
            await history.close()

    @invariant()
    def no_secret_reaches_a_caller(self) -> None:
        for outcome in self.outcomes:
            assert SECRET not in outcome.model_dump_json()
        for run in self._stored():
            assert run.result is None or SECRET not in run.result.model_dump_json()

    @invariant()
    def every_row_reads_back(self) -> None:
        stored = {r.run_id for r in self._stored()}
        assert set(self.run_ids) <= stored
        faults = getattr(self.store, "decode_faults", None)
        assert faults is None or faults.rows() == []


SETTINGS = {"stateful_step_count": 40, "deadline": None, "derandomize": True, "database": None}


class MemoryModel(CrossFeatureMachine):
    store_kind = "memory"


class SqliteModel(CrossFeatureMachine):
    store_kind = "sqlite"


class PostgresModel(CrossFeatureMachine):
    store_kind = "postgres"


MemoryModel.TestCase.settings = settings(max_examples=30, **SETTINGS)  # type: ignore[arg-type]
SqliteModel.TestCase.settings = settings(max_examples=8, **SETTINGS)  # type: ignore[arg-type]
PostgresModel.TestCase.settings = settings(
    max_examples=6,
    suppress_health_check=[HealthCheck.too_slow],
    **SETTINGS,  # type: ignore[arg-type]
)

test_the_features_compose_on_the_memory_store = MemoryModel.TestCase
test_the_features_compose_on_sqlite = SqliteModel.TestCase


@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True) as url:
        yield url


@pytest.mark.postgres
def test_the_features_compose_on_postgres(postgres_database: str) -> None:
    PostgresModel.url = postgres_database
    try:
        PostgresModel.TestCase("runTest").runTest()
    finally:
        PostgresModel.url = None
