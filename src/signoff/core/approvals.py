"""``Approvals``: decisions, quorum, resume and expiry of runs waiting for approval.

Approval is data on the run, decided by compare-and-set: concurrent approvers each re-read and
re-apply, so exactly one of them moves the run to RUNNING and dispatches. Resume never reserves
again; it re-resolves the definition, re-validates the stored input, re-evaluates current policy,
and the guard runs immediately before dispatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from signoff.core import admission, limit_stage
from signoff.core.amendments import AmendmentRefused, amended
from signoff.core.answers import outcome_of, terminal_status_for
from signoff.core.approval_digest import short_digest
from signoff.core.audit_events import Actor, AuditKind, Decision
from signoff.core.background import Notifications
from signoff.core.codes import Code
from signoff.core.definition import ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.identity import Channel, Principal
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.limits import LimitDecision
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import (
    ActionRun,
    ApprovalDecision,
    ApprovalState,
    ApprovalVote,
    RunStatus,
)


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """An approver's decision as a surface hands it over; identity from trusted context."""

    approver: Principal
    vote: ApprovalVote
    reason: str = ""
    channel: Channel = Channel.API
    via: str | None = None
    # The run version the approver was shown (a decision link): a run that moved on since then
    # refuses the decision instead of applying it to something the approver did not see.
    expected_version: int | None = None
    # Approve with these input fields changed (only those ``approval.amend`` lists).
    amendments: Mapping[str, Any] | None = None
    # False: the decision is only recorded; a serving process dispatches an approved run
    # (``dispatch_approved``). Surfaces without an executing process (the CLI) use it.
    dispatch: bool = True


@dataclass(frozen=True, slots=True)
class DecisionResult:
    """``code`` says what happened to the decision; ``outcome`` is the run as it now stands."""

    code: str
    outcome: ActionOutcome | None
    accepted: bool


def approver_refusal(
    run: ActionRun, approver: Principal, *, operator: str | None = None
) -> Code | None:
    """Why ``approver`` may not decide this pending run, or ``None`` if they may.

    The one statement of the rule: an approver holds a role the approval names, is never the
    proposer, and decides once; an approved run awaiting dispatch takes no more decisions; and
    one ``operator`` (the OS user behind a CLI decision) casts at most one vote per run, whatever
    names it gives. Surfaces use it only to decide what to show.
    """
    state = run.approval
    if state is None or state.approved_at is not None:
        return Code.APPROVAL_NOT_PENDING
    if approver.id == run.principal.id or not approver.has_any_role(state.approver_roles):
        return Code.APPROVER_NOT_ELIGIBLE
    if state.decided_by(approver.id) is not None:
        return Code.APPROVAL_ALREADY_DECIDED
    if operator is not None and any(
        d.channel is Channel.CLI and d.via == operator for d in state.decisions
    ):
        return Code.APPROVAL_ALREADY_DECIDED
    return None


def is_overdue(run: ActionRun, now: datetime) -> bool:
    """Waiting for approval past its deadline (the one statement of "overdue")."""
    return (
        run.status is RunStatus.WAITING_APPROVAL
        and run.approval is not None
        and run.approval.overdue(now)
    )


def digest_refusal(
    action: CompiledAction, run: ActionRun, state: ApprovalState
) -> ExecutionResult | None:
    """Dispatch runs exactly what was approved: the digest recomputed now (current definition
    revision, the run's input, resource, principal, tenant) must equal the digest every
    approving decision recorded (each approver approved the call as it stood when they voted)."""
    now_digest = limit_stage.digest_of(action, run)
    approved = [d.digest for d in state.approvals() if d.digest is not None]
    mismatch = next((d for d in approved if d != now_digest), None)
    if mismatch is None:  # also: votes cast before digests existed
        return None
    return ExecutionResult.denied(
        Code.APPROVAL_DIGEST_MISMATCH,
        f"What would run ({short_digest(now_digest)}) is not what was approved "
        f"({short_digest(mismatch)}); nothing ran.",
    ).model_copy(update={"output": {"approved": mismatch, "now": now_digest}})


class Approvals:
    """Owns the approval stage: recording decisions, quorum, resume and expiry."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        notifications: Notifications,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._notifications = notifications
        self._clock = clock

    async def decide(self, run_id: str, tenant_id: str, request: DecisionRequest) -> DecisionResult:
        """Record one approver's decision; on the last needed approval, resume and dispatch."""
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            if run is None:
                return DecisionResult(Code.ACTION_RUN_NOT_FOUND, None, accepted=False)
            if run.status is not RunStatus.WAITING_APPROVAL or run.approval is None:
                code = (
                    Code.APPROVAL_EXPIRED
                    if run.status is RunStatus.EXPIRED
                    else Code.APPROVAL_NOT_PENDING
                )
                return DecisionResult(code, outcome_of(run), accepted=False)
            if self.overdue(run):
                await self.expire(run)
                current = await self._ledger.truth(run_id)
                return DecisionResult(Code.APPROVAL_EXPIRED, current, accepted=False)
            if request.expected_version is not None and run.version != request.expected_version:
                return DecisionResult(Code.APPROVAL_RUN_CHANGED, outcome_of(run), accepted=False)
            state = run.approval
            approver = request.approver
            operator = request.via if request.channel is Channel.CLI else None
            refusal = approver_refusal(run, approver, operator=operator)
            if refusal is not None:
                return DecisionResult(refusal, outcome_of(run), accepted=False)
            now = self._clock.now()
            if request.amendments is not None:
                action_now = self._registry.resolve(run.action_id)
                try:
                    if request.vote is not ApprovalVote.APPROVE or action_now is None:
                        raise AmendmentRefused(
                            Code.AMENDMENT_NOT_ALLOWED, "Only an approval can amend the input."
                        )
                    run = amended(action_now, run, approver.id, request.amendments, now)
                except AmendmentRefused as refused:
                    return DecisionResult(refused.code, outcome_of(run), accepted=False)
                assert run.approval is not None
                state = run.approval  # an escalated tier raises the count
            action = self._registry.resolve(run.action_id)
            # What this approver approves: the call as it would run under the definition now.
            digest = limit_stage.digest_of(action, run) if action is not None else state.digest
            decision = ApprovalDecision(
                approver_id=approver.id,
                roles=approver.roles,
                decision=request.vote,
                reason=request.reason,
                at=now,
                channel=request.channel,
                via=request.via,
                digest=digest,
            )
            state = state.model_copy(update={"decisions": (*state.decisions, decision)})
            audit: dict[str, Any] = {
                "vote": str(request.vote),
                "reason": request.reason,
                "via": request.via,
                "digest": digest,
            }
            if request.amendments is not None and run.amendments:
                last = run.amendments[-1]
                audit["amended"] = {"changes": last.changes, "previous": last.previous}

            if request.vote is ApprovalVote.REJECT:
                result = ExecutionResult.denied(
                    Code.APPROVAL_REJECTED, request.reason or "Rejected by an approver."
                )
                outcome = await self._ledger.terminal(
                    run,
                    result,
                    AuditKind.APPROVAL_REJECTED,
                    actor=approver.id,
                    data=audit,
                    approval=state,
                )
                if outcome is None:
                    continue
                self._notifications.decided(run.run_id, Decision.REJECTED)
                return DecisionResult(Code.APPROVAL_REJECTED, outcome, accepted=True)

            if action is not None and not self._quorum(action, run, state):
                waiting = run.advance(RunStatus.WAITING_APPROVAL, now, approval=state)
                stored = await self._ledger.cas(
                    run, waiting, AuditKind.APPROVAL_RECORDED, actor=approver.id, data=audit
                )
                if stored is None:
                    continue
                self._notifications.decided(run.run_id, Decision.RECORDED)
                return DecisionResult(Code.APPROVAL_RECORDED, outcome_of(stored), accepted=True)

            if not request.dispatch:
                # Recorded as approved; the run keeps waiting until a serving process resumes
                # it (``dispatch_approved``) through the same re-checks as any approval.
                approved = state.model_copy(update={"approved_at": now})
                waiting = run.advance(RunStatus.WAITING_APPROVAL, now, approval=approved)
                stored = await self._ledger.cas(
                    run,
                    waiting,
                    AuditKind.APPROVED_AWAITING_DISPATCH,
                    actor=approver.id,
                    data=audit,
                )
                if stored is None:
                    continue
                self._notifications.decided(run.run_id, Decision.APPROVED)
                return DecisionResult(
                    Code.APPROVAL_AWAITING_DISPATCH, outcome_of(stored), accepted=True
                )
            outcome = await self._resume(run, action, state, approver.id, audit)
            if outcome is None:
                continue
            self._notifications.decided(run.run_id, Decision.APPROVED)
            return DecisionResult(outcome.code, outcome, accepted=True)
        raise RuntimeError(f"decide on {run_id}: too much contention")

    @staticmethod
    def _quorum(action: CompiledAction, run: ActionRun, state: ApprovalState) -> bool:
        """Quorum under the *current* approver rule as well as the one the run was created with."""
        spec = action.definition.approval
        roles = set(state.approver_roles) & set(spec.approver_roles) or set(spec.approver_roles)
        approvers = {
            d.approver_id
            for d in state.approvals()
            if d.approver_id != run.principal.id and roles.intersection(d.roles)
        }
        return len(approvers) >= max(state.count, spec.count)

    async def _resume(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        state: ApprovalState,
        approver_id: str,
        audit: dict[str, str | None],
    ) -> ActionOutcome | None:
        """The last approval arrived: re-check everything, then dispatch. ``None``: CAS lost."""
        now = self._clock.now()
        refusal: ExecutionResult | None
        if action is None:
            refusal = ExecutionResult.denied(
                Code.ACTION_NOT_REGISTERED, f"{run.action_id} is no longer registered."
            )
        else:
            refusal = admission.recheck(action, run, now) or digest_refusal(action, run, state)
        if refusal is not None:
            return await self._ledger.terminal(
                run,
                refusal,
                AuditKind.RESUME_REFUSED,
                actor=approver_id,
                data=audit,
                approval=state,
            )
        assert action is not None
        started = self._dispatcher.start_attempt(run, now, approval=state)
        checks = limit_stage.checks_for(action, run, admission.policy_input(run, now))
        if isinstance(checks, ExecutionResult):
            return await self._ledger.terminal(
                run, checks, AuditKind.RESUME_REFUSED, actor=approver_id, data=audit, approval=state
            )

        def on_limits(verdict: LimitDecision) -> tuple[ActionRun, AuditKind]:
            """Resume re-checks the limits: a deny limit now exceeded refuses; an approval limit
            is what the approvers just approved."""
            if verdict.denied:
                result = limit_stage.denial(verdict)
                return run.advance(
                    terminal_status_for(result), now, result=result, approval=state
                ), AuditKind.LIMIT_EXCEEDED
            held = tuple(check.spec.name for check in checks)
            return started.model_copy(update={"limits_held": held}), AuditKind.APPROVED_DISPATCHING

        stored = await self._ledger.cas(
            run,
            started,
            AuditKind.APPROVED_DISPATCHING,
            actor=approver_id,
            data={
                **audit,
                "revision": action.revision,
                "executed_digest": limit_stage.digest_of(action, run),
            },
            limits=checks,
            on_limits=on_limits,
        )
        if stored is not None and stored.is_terminal:
            return outcome_of(stored)
        if stored is None:
            return None
        if action.definition.mode is ExecutorMode.ASYNC:
            self._dispatcher.force_background(run.tenant_id)
        return await self._dispatcher.dispatch(action, stored)

    # ------------------------------------------------------------------ expiry
    def overdue(self, run: ActionRun) -> bool:
        """Waiting for approval past its deadline (expired by the next read or the sweeper)."""
        return is_overdue(run, self._clock.now())

    async def expire(self, run: ActionRun) -> bool:
        """Move an overdue run to EXPIRED; ``False`` when another write got there first."""
        result = ExecutionResult.denied(Code.APPROVAL_EXPIRED, "Nobody approved it in time.")
        outcome = await self._ledger.terminal(
            run, result, AuditKind.APPROVAL_EXPIRED, actor=Actor.SIGNOFF
        )
        if outcome is not None:
            self._notifications.decided(run.run_id, Decision.EXPIRED)
        return outcome is not None

    async def settled(self, run: ActionRun) -> ActionRun:
        """``run`` as a reader should see it: an overdue approval is expired first."""
        if not self.overdue(run):
            return run
        await self.expire(run)
        current = await self._ledger.load(run.run_id)
        assert current is not None
        return current

    async def expire_overdue(self, limit: int = 1000) -> int:
        """The sweeper: move every overdue approval of every tenant to EXPIRED, reading the
        waiting runs ``limit`` at a time, oldest first, to the end (a flood of new requests never
        shields an old one). Returns how many it moved."""
        moved = 0
        async for run in self._ledger.every(RunStatus.WAITING_APPROVAL, limit):
            if self.overdue(run) and await self.expire(run):
                moved += 1
        return moved

    async def dispatch_approved(self, limit: int = 200) -> int:
        """A serving process's chore: resume every run approved without dispatch (a CLI decision
        on the database), exactly as if its last approval had arrived here — re-resolve,
        re-validate, re-evaluate policy, guard, dispatch. The compare-and-set into RUNNING lets
        exactly one process dispatch it. Returns how many this call resumed."""
        resumed = 0
        async for run in self._ledger.every(RunStatus.WAITING_APPROVAL, limit):
            state = run.approval
            if state is None or state.approved_at is None:
                continue
            action = self._registry.resolve(run.action_id)
            last = state.approvals()[-1].approver_id if state.approvals() else "signoff"
            outcome = await self._resume(run, action, state, last, {"via": "dispatch_approved"})
            resumed += outcome is not None
        return resumed
