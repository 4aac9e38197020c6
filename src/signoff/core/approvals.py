"""``Approvals``: recording decisions, quorum, hand-over and expiry of runs waiting for approval.

Approval is data on the run, decided by compare-and-set: concurrent approvers each re-read and
re-apply, so exactly one of them moves the run to RUNNING and dispatches. Resume never reserves
again; it re-resolves the definition, re-validates the stored input, re-evaluates current policy,
and the guard runs immediately before dispatch.

The rules a decision is judged by (bound to the view shown, standing decisions, amendments
re-checking limits, mixed revisions) are stated in ``decisions.py``; the resume stage is
``resume.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from signoff.core import admission, confirmation, limit_stage, substance
from signoff.core.amendments import AmendmentRefused, amended
from signoff.core.answers import outcome_of
from signoff.core.audit_events import Actor, AuditKind, Decision
from signoff.core.background import Notifications
from signoff.core.codes import Code
from signoff.core.decisions import (
    FLEET_TTL,
    DecisionRequest,
    DecisionResult,
    OverLimit,
    Plan,
    amended_limits,
    approver_refusal,
    digest_refusal,
    is_overdue,
    stale_view,
)
from signoff.core.dispatcher import Dispatcher
from signoff.core.identity import Channel
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ExecutionResult
from signoff.core.resume import Resume
from signoff.core.run import ActionRun, ApprovalDecision, ApprovalState, ApprovalVote, RunStatus

__all__ = [
    "Approvals",
    "DecisionRequest",
    "DecisionResult",
    "approver_refusal",
    "digest_refusal",
    "is_overdue",
    "stale_view",
]


class Approvals:
    """Owns the approval stage: recording decisions, quorum, resume and expiry."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        notifications: Notifications,
        clock: Clock,
        fleet_ttl: timedelta = FLEET_TTL,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._notifications = notifications
        self._clock = clock
        self._fleet_ttl = fleet_ttl
        self._resumer = Resume(ledger, dispatcher, clock)

    async def _held(self, action_id: str, now: datetime) -> set[str]:
        """The revisions of ``action_id`` live instances hold (heartbeats within the TTL)."""
        return await self._ledger.revisions_held(action_id, now - self._fleet_ttl)

    async def decide(self, run_id: str, tenant_id: str, request: DecisionRequest) -> DecisionResult:
        """Record one approver's decision; on the last needed approval, resume and dispatch."""
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            refused = await self._refusal(run, run_id, request)
            if refused is not None:
                return refused
            assert run is not None
            try:
                plan = await self._plan(run, request)
            except AmendmentRefused as refusal:
                return DecisionResult(refusal.code, outcome_of(run), False, str(refusal))
            try:
                answer = await self._record(plan, request)
            except OverLimit as over:
                return DecisionResult(
                    Code.LIMIT_EXCEEDED, outcome_of(run), False, over.result.message
                )
            if answer is not None:
                return answer
        raise RuntimeError(f"decide on {run_id}: too much contention")

    async def _refusal(
        self, run: ActionRun | None, run_id: str, request: DecisionRequest
    ) -> DecisionResult | None:
        """Why this decision is answered without writing it, or ``None``."""
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
        if stale_view(run, request.expected_version):
            return DecisionResult(Code.APPROVAL_RUN_CHANGED, outcome_of(run), accepted=False)
        operator = request.via if request.channel is Channel.CLI else None
        refusal = approver_refusal(run, request.approver, operator=operator)
        if refusal is not None:
            return DecisionResult(refusal, outcome_of(run), accepted=False)
        return None

    async def _plan(self, run: ActionRun, request: DecisionRequest) -> Plan:
        """The decision worked out in memory: the amendment and its limits, the revision it is
        made under, the digest it approves. Raises ``AmendmentRefused``."""
        now = self._clock.now()
        approver = request.approver
        action = self._registry.resolve(run.action_id)
        changed, limits = run, []
        if request.amendments is not None:
            if request.vote is not ApprovalVote.APPROVE or action is None:
                raise AmendmentRefused(
                    Code.AMENDMENT_NOT_ALLOWED, "Only an approval can amend the input."
                )
            if run.repair_of is not None:
                raise AmendmentRefused(
                    Code.AMENDMENT_NOT_ALLOWED,
                    "A repair re-dispatches the operation as it was approved; it cannot be amended.",
                )
            changed = amended(action, run, approver.id, request.amendments, now)
            checks = limit_stage.checks_for_run(
                action, changed, admission.policy_input(changed, now)
            )
            if isinstance(checks, ExecutionResult):
                raise AmendmentRefused(Code.AMENDMENT_INVALID, checks.message)
            limits = checks
        asked = changed.approval.revision if changed.approval is not None else None
        state, elsewhere = await self._asked_under(action, changed, now)
        revision = state.revision
        refusal = None
        if action is not None and asked not in (None, revision):
            refusal = admission.recheck(action, changed, now)
        digest: str | None = state.digest
        if action is not None and revision is not None:
            digest = limit_stage.digest_of(action, changed, revision=revision)
        if changed is not run:
            state = state.model_copy(update={"digest": digest})
        decision = ApprovalDecision(
            approver_id=approver.id,
            roles=approver.roles,
            decision=request.vote,
            reason=request.reason,
            at=now,
            channel=request.channel,
            via=request.via,
            digest=digest,
            revision=revision,
            seen=substance.of(changed).changed_at,
        )
        state = state.model_copy(update={"decisions": (*state.decisions, decision)})
        changed = changed.model_copy(update={"approval": state})
        audit: dict[str, Any] = {
            "vote": str(request.vote),
            "reason": request.reason,
            "via": request.via,
            "digest": digest,
            "revision": revision,
            substance.DECISION_DIGEST: substance.decision_digest(decision),
        }
        if changed.amendments != run.amendments:
            last = changed.amendments[-1]
            audit["amended"] = {"changes": last.changes, "previous": last.previous}
            audit.update(substance.amendment_facts(changed))
        return Plan(run, changed, action, decision, audit, limits, elsewhere, refusal=refusal)

    async def _asked_under(
        self, action: CompiledAction | None, run: ActionRun, now: datetime
    ) -> tuple[ApprovalState, bool]:
        """The approval state with the revision decisions are made under, and whether another
        instance (holding that revision) dispatches it."""
        state = run.approval
        assert state is not None
        if action is None:
            return state, False
        asked = state.revision
        if asked is None or asked == action.revision:
            return state.model_copy(update={"revision": action.revision}), False
        if asked in await self._held(run.action_id, now):
            return state, True
        return self._asked_again(action, run, state), False

    @staticmethod
    def _asked_again(action: CompiledAction, run: ActionRun, state: ApprovalState) -> ApprovalState:
        """The approval asked again under ``action``'s revision: the revision it was asked under
        is gone from the fleet, so earlier decisions (kept on the record) no longer count."""
        return state.model_copy(
            update={
                "revision": action.revision,
                "digest": limit_stage.digest_of(action, run),
                "approved_at": None,
            }
        )

    async def _record(self, plan: Plan, request: DecisionRequest) -> DecisionResult | None:
        """Write the decision (and what it leads to); ``None``: the race was lost, re-read."""
        run, changed, action = plan.run, plan.changed, plan.action
        approver_id = request.approver.id
        now = self._clock.now()
        if request.vote is ApprovalVote.REJECT:
            result = ExecutionResult.denied(
                Code.APPROVAL_REJECTED, request.reason or "Rejected by an approver."
            )
            outcome = await self._ledger.terminal(
                run,
                result,
                AuditKind.APPROVAL_REJECTED,
                actor=approver_id,
                data=plan.audit,
                approval=plan.state,
            )
            if outcome is None:
                return None
            self._notifications.decided(run.run_id, Decision.REJECTED)
            return DecisionResult(Code.APPROVAL_REJECTED, outcome, accepted=True)

        if plan.refusal is not None:  # asked again under a definition that now refuses it
            outcome = await self._ledger.terminal(
                changed,
                plan.refusal,
                AuditKind.RESUME_REFUSED,
                actor=approver_id,
                data=plan.audit,
                approval=plan.state,
            )
            return None if outcome is None else DecisionResult(outcome.code, outcome, True)
        if action is not None and not self._quorum(action, changed):
            return await self._waiting(
                plan, changed.advance(RunStatus.WAITING_APPROVAL, now), AuditKind.APPROVAL_RECORDED
            )
        if not request.dispatch or plan.elsewhere:
            # Recorded as approved; the run keeps waiting until a serving process holding the
            # revision it was approved under resumes it (``dispatch_approved``).
            approved = plan.state.model_copy(update={"approved_at": now})
            return await self._waiting(
                plan,
                changed.advance(RunStatus.WAITING_APPROVAL, now, approval=approved),
                AuditKind.APPROVED_AWAITING_DISPATCH,
            )
        outcome = await self._resumer.resume(changed, action, approver_id, plan.audit, base=plan)
        if outcome is None:
            return None
        if plan.parked:
            self._notifications.decided(run.run_id, Decision.RECORDED)
            return DecisionResult(Code.AMENDMENT_OVER_LIMIT, outcome, accepted=True)
        self._notifications.decided(run.run_id, Decision.APPROVED)
        return DecisionResult(outcome.code, outcome, accepted=True)

    async def _waiting(
        self, plan: Plan, updated: ActionRun, kind: AuditKind
    ) -> DecisionResult | None:
        """The run keeps waiting with the decision recorded (or approved for dispatch elsewhere)."""
        stored = await self._ledger.cas(
            plan.run,
            updated,
            kind,
            actor=plan.decision.approver_id,
            data=plan.audit,
            limits=plan.limits,
            on_limits=amended_limits(plan, updated, kind) if plan.limits else None,
        )
        if stored is None:
            return None
        if plan.parked:
            self._notifications.decided(plan.run.run_id, Decision.RECORDED)
            return DecisionResult(Code.AMENDMENT_OVER_LIMIT, outcome_of(stored), accepted=True)
        if kind is AuditKind.APPROVED_AWAITING_DISPATCH:
            self._notifications.decided(plan.run.run_id, Decision.APPROVED)
            return DecisionResult(Code.APPROVAL_AWAITING_DISPATCH, outcome_of(stored), True)
        self._notifications.decided(plan.run.run_id, Decision.RECORDED)
        return DecisionResult(Code.APPROVAL_RECORDED, outcome_of(stored), accepted=True)

    @staticmethod
    def _quorum(action: CompiledAction, run: ActionRun) -> bool:
        """Quorum of standing approvals under the *current* approver rule as well as the one the
        run was created with."""
        state = run.approval
        assert state is not None
        spec = action.definition.approval
        roles = set(state.approver_roles) & set(spec.approver_roles) or set(spec.approver_roles)
        approvers = {
            d.approver_id
            for d in substance.standing(run)
            if d.decision is ApprovalVote.APPROVE
            and d.approver_id != run.principal.id
            and roles.intersection(d.roles)
        }
        return len(approvers) >= max(state.count, spec.count)

    # ------------------------------------------------------------------ expiry
    def overdue(self, run: ActionRun) -> bool:
        """Waiting for approval past its deadline (expired by the next read or the sweeper)."""
        return is_overdue(run, self._clock.now())

    async def expire(self, run: ActionRun) -> bool:
        """Move an overdue run to EXPIRED; ``False`` when another write got there first."""
        result = ExecutionResult.denied(Code.APPROVAL_EXPIRED, "Nobody approved it in time.")
        result = confirmation.expiry(run) or result
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
        on the database, or approved under a revision this process holds while another decided
        it), exactly as if its last approval had arrived here — re-resolve, re-validate,
        re-evaluate policy, guard, dispatch. The compare-and-set into RUNNING lets exactly one
        process dispatch it. A run approved under a revision no live instance holds any more is
        asked again under this one's. Returns how many this call resumed, settled or re-asked."""
        resumed = 0
        async for run in self._ledger.every(RunStatus.WAITING_APPROVAL, limit):
            state = run.approval
            if state is None or state.approved_at is None:
                continue
            action = self._registry.resolve(run.action_id)
            if action is not None and state.revision not in (None, action.revision):
                resumed += await self._hand_over_or_ask_again(action, run)
                continue
            standing = [d for d in substance.standing(run) if d.decision is ApprovalVote.APPROVE]
            last = standing[-1].approver_id if standing else "signoff"
            outcome = await self._resumer.resume(run, action, last, {"via": "dispatch_approved"})
            resumed += outcome is not None
        return resumed

    async def _hand_over_or_ask_again(self, action: CompiledAction, run: ActionRun) -> bool:
        """An approved run waits for an instance holding the revision it was approved under;
        when none is alive any more, its approval is asked again under ours (or refused, when
        ours refuses it). ``True`` when this process settled or re-asked it."""
        state = run.approval
        assert state is not None
        now = self._clock.now()
        if state.revision in await self._held(run.action_id, now):
            return False
        refusal = admission.recheck(action, run, now)
        if refusal is not None:  # no need to ask anyone: the current definition refuses it
            outcome = await self._ledger.terminal(
                run, refusal, AuditKind.RESUME_REFUSED, actor=Actor.SIGNOFF, approval=state
            )
            return outcome is not None
        again = self._asked_again(action, run, state)
        stored = await self._ledger.cas(
            run,
            run.advance(RunStatus.WAITING_APPROVAL, now, approval=again),
            AuditKind.APPROVAL_ASKED_AGAIN,
            actor=Actor.SIGNOFF,
            data={"was": state.revision, "revision": action.revision, "digest": again.digest},
        )
        if stored is None:
            return False
        self._notifications.requested(stored)
        return True
