"""``Confirmations``: the requester confirms what will run (``approval.confirm: requester``).

When a proposal's ``approval.confirm.when`` holds, the run waits (``WAITING_APPROVAL``, durable,
its duplicate scope reserved and its limits held like any waiting run) with a ``Confirmation``
bound to the digest of what will run, and the ``Confirmer`` the surface handed over asks the
requester's human:

- accept: the confirmation is recorded as a decision with channel ``elicitation`` and the
  digest of what was shown; when approvers must decide too, the run keeps waiting for them
  (a confirmation never counts towards their quorum: four-eyes stays four-eyes), otherwise it
  resumes through the same stages as an approval (re-validate, re-check policy and limits,
  guard, dispatch);
- decline or cancel: ``DENIED`` / ``CONFIRMATION_DECLINED``, nothing ran;
- no answer before ``confirm.wait``: the outcome is ``PENDING_APPROVAL`` /
  ``CONFIRMATION_REQUIRED``; the same principal confirms it later (``answer``), or it expires
  with ``CONFIRMATION_EXPIRED`` when ``approval.expires_after`` passes.

A host that cannot be asked (no elicitation capability) gets the manifest's ``fallback``:
``approvers`` routes the run to approvers, ``refuse`` refuses it (``CONFIRMATION_UNAVAILABLE``).
Approvers cannot decide a run before its requester confirmed it (``approver_refusal``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from signoff.core import substance
from signoff.core.answers import not_found, outcome_of
from signoff.core.audit_events import AuditKind, Decision
from signoff.core.background import Notifications
from signoff.core.codes import Code
from signoff.core.confirmer import ConfirmationAnswer, ConfirmationRequest, Confirmer
from signoff.core.decisions import is_overdue
from signoff.core.definition import ConfirmSpec
from signoff.core.dispatcher import Dispatcher
from signoff.core.identity import Channel, Principal
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.resume import Resume
from signoff.core.run import (
    ActionRun,
    ApprovalDecision,
    ApprovalState,
    ApprovalVote,
    Confirmation,
    RunStatus,
)
from signoff.core.visibility import masked_outcome, masked_run


def unavailable() -> ExecutionResult:
    return ExecutionResult.denied(
        Code.CONFIRMATION_UNAVAILABLE,
        "This action needs your confirmation and your host cannot ask for it (no elicitation "
        "support); nothing ran.",
    )


def expiry(run: ActionRun) -> ExecutionResult | None:
    """How an overdue run still waiting for its requester's confirmation ends (``None``: it
    waits for approvers only)."""
    if run.approval is None or not run.approval.awaits_confirmation:
        return None
    return ExecutionResult.denied(
        Code.CONFIRMATION_EXPIRED, "You did not confirm it in time; nothing ran."
    )


def asked(state: ApprovalState, run: ActionRun, now: datetime, *, approvers: bool) -> ApprovalState:
    """``state`` with the requester's confirmation asked for, bound to what will run; without
    ``approvers`` nobody else decides (no approver role is eligible)."""
    confirmation = Confirmation(shown=substance.of(run).will_run_digest, asked_at=now)
    update: dict[str, object] = {"confirmation": confirmation}
    if not approvers:
        update["approver_roles"] = ()
    return state.model_copy(update=update)


def request_for(action: CompiledAction, run: ActionRun, spec: ConfirmSpec) -> ConfirmationRequest:
    """What the requester is shown: what will run, sensitive values masked."""
    definition = action.definition
    shown = masked_run(run.model_copy(update={"input": substance.will_run(run)}), definition)
    title = definition.title or definition.id
    return ConfirmationRequest(
        run_id=run.run_id,
        action_id=run.action_id,
        title=title,
        message=f"Confirm {title}: this is exactly what will run on your behalf.",
        values=dict(shown.input),
        digest=substance.of(run).will_run_digest,
        wait=spec.wait,
        display=dict(definition.display),
    )


class Confirmations:
    """Owns the requester-confirmation stage: asking, recording the answer, resuming."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        notifications: Notifications,
        clock: Clock,
        expire: Callable[[ActionRun], Awaitable[bool]],
        shield: Callable[[Awaitable[ActionOutcome]], Awaitable[ActionOutcome]],
    ) -> None:
        """``expire`` moves an overdue waiting run to EXPIRED (``Approvals.expire``); ``shield``
        finishes an answer even when the caller hangs up (``Background.shield``)."""
        self._expire = expire
        self._shield = shield
        self._registry = registry
        self._ledger = ledger
        self._notifications = notifications
        self._clock = clock
        self._resumer = Resume(ledger, dispatcher, clock)

    async def ask(
        self, action: CompiledAction, run: ActionRun, confirmer: Confirmer
    ) -> ActionOutcome:
        """Ask the requester about a committed waiting run; record the answer, if one came."""
        spec = action.definition.approval.confirm
        assert spec is not None
        answer = await confirmer.ask(request_for(action, run, spec))
        if answer is None:
            return outcome_of(run)
        digest = substance.of(run).will_run_digest
        return await self._answer(run.run_id, run.tenant_id, run.principal, answer, digest)

    async def pending(
        self, run_id: str, tenant_id: str, principal: Principal
    ) -> ConfirmationRequest | None:
        """What the requester would be shown for its run's pending confirmation (``None``: no
        such run of this principal waits for one)."""
        run = await self._ledger.load_in(run_id, tenant_id)
        if run is None or run.principal.id != principal.id or run.approval is None:
            return None
        if run.status is not RunStatus.WAITING_APPROVAL or not run.approval.awaits_confirmation:
            return None
        action = self._registry.resolve(run.action_id)
        spec = action.definition.approval.confirm if action is not None else None
        if action is None or spec is None:
            return None
        return request_for(action, run, spec)

    async def answer(
        self,
        run_id: str,
        tenant_id: str,
        principal: Principal,
        answer: ConfirmationAnswer,
        shown: str | None = None,
    ) -> ActionOutcome:
        """The requester's answer to a pending confirmation. Only the requester (the run's own
        principal) answers: anyone else hears ``ACTION_RUN_NOT_FOUND``, like a missing run. An
        answer given on ``shown`` other than what will run now is not recorded. Sensitive output
        values come back masked."""
        outcome = await self._shield(self._answer(run_id, tenant_id, principal, answer, shown))
        action = self._registry.resolve(outcome.action) if outcome.action else None
        return masked_outcome(outcome, action.definition if action is not None else None)

    async def _answer(
        self,
        run_id: str,
        tenant_id: str,
        principal: Principal,
        answer: ConfirmationAnswer,
        shown: str | None,
    ) -> ActionOutcome:
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            if run is None or run.principal.id != principal.id:
                return not_found(run_id)
            state = run.approval
            if run.status is not RunStatus.WAITING_APPROVAL or state is None:
                return outcome_of(run)
            confirmation = state.confirmation
            if confirmation is None or not confirmation.pending:
                return outcome_of(run)
            now = self._clock.now()
            if is_overdue(run, now):
                await self._expire(run)
                return await self._ledger.truth(run_id)
            digest = substance.of(run).will_run_digest
            if shown is not None and shown != digest:
                return outcome_of(run)
            outcome = await self._record(run, state, confirmation, principal, answer, now)
            if outcome is not None:
                return outcome
        raise RuntimeError(f"confirm {run_id}: too much contention")

    async def _record(
        self,
        run: ActionRun,
        state: ApprovalState,
        confirmation: Confirmation,
        principal: Principal,
        answer: ConfirmationAnswer,
        now: datetime,
    ) -> ActionOutcome | None:
        """Write the answer (and what it leads to); ``None``: the race was lost, re-read."""
        will = substance.of(run)
        accepted = answer is ConfirmationAnswer.ACCEPT
        decision = ApprovalDecision(
            approver_id=principal.id,
            roles=principal.roles,
            decision=ApprovalVote.APPROVE if accepted else ApprovalVote.REJECT,
            reason=f"requester {answer}",
            at=now,
            channel=Channel.ELICITATION,
            digest=will.will_run_digest,
            revision=state.revision,
            seen=will.changed_at,
        )
        answered = state.model_copy(
            update={"confirmation": confirmation.model_copy(update={"decision": decision})}
        )
        audit = {
            "answer": str(answer),
            "shown": will.will_run_digest,
            substance.CONFIRMATION_DIGEST: substance.decision_digest(decision),
        }
        if not accepted:
            result = ExecutionResult.denied(
                Code.CONFIRMATION_DECLINED, "You declined this request; nothing ran."
            )
            declined = await self._ledger.terminal(
                run,
                result,
                AuditKind.CONFIRMATION_DECLINED,
                actor=principal.id,
                data=audit,
                approval=answered,
            )
            if declined is not None:
                self._notifications.decided(run.run_id, Decision.REJECTED)
            return declined
        changed = run.model_copy(update={"approval": answered})
        if answered.needs_approvers:
            stored = await self._ledger.cas(
                run,
                changed.advance(RunStatus.WAITING_APPROVAL, now),
                AuditKind.CONFIRMED,
                actor=principal.id,
                data=audit,
            )
            if stored is None:
                return None
            self._notifications.requested(stored)  # now the approvers are asked
            return outcome_of(stored)
        action = self._registry.resolve(run.action_id)
        resumed = await self._resumer.resume(changed, action, principal.id, audit)
        if resumed is not None:
            self._notifications.decided(run.run_id, Decision.APPROVED)
        return resumed
