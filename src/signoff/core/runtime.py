"""``Runtime``: the pipeline plus approval decisions, resume, expiry, cancellation and reads.

Approval is data on the run, decided by compare-and-set: concurrent approvers each re-read and
re-apply, so exactly one of them moves the run to RUNNING and dispatches. Resume never reserves
again; it re-resolves the definition, re-validates the stored input, re-evaluates current policy,
and the guard runs immediately before dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.compiled import CompiledAction
from signoff.core.definition import ExecutorMode
from signoff.core.dispatch import shielded
from signoff.core.identity import Channel, Principal
from signoff.core.outcomes import event, outcome_of, terminal_status_for
from signoff.core.pipeline import Pipeline
from signoff.core.policy import evaluate_policy
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import (
    ActionRun,
    ApprovalDecision,
    ApprovalState,
    ApprovalVote,
    RunStatus,
)

_CANCELLABLE = frozenset(
    {
        RunStatus.REQUESTED,
        RunStatus.VALIDATING,
        RunStatus.POLICY_EVALUATED,
        RunStatus.WAITING_APPROVAL,
    }
)
_MAX_CAS_ATTEMPTS = 64


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """An approver's decision as a surface hands it over; identity from trusted context."""

    approver: Principal
    vote: ApprovalVote
    reason: str = ""
    channel: Channel = Channel.API
    via: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionResult:
    """``code`` says what happened to the decision; ``outcome`` is the run as it now stands."""

    code: str
    outcome: ActionOutcome | None
    accepted: bool


class Runtime(Pipeline):
    # ------------------------------------------------------------------- reads
    async def get(self, run_id: str, tenant_id: str) -> ActionOutcome | None:
        """The run's outcome, or ``None`` when it does not exist in this tenant (never disclosed)."""
        run = await self.get_run(run_id, tenant_id)
        return outcome_of(run) if run is not None else None

    async def get_run(self, run_id: str, tenant_id: str) -> ActionRun | None:
        run = await self.load(run_id)
        if run is None or run.tenant_id != tenant_id:
            return None
        if self._overdue(run):
            await self._expire(run)
            run = await self.load(run_id)
        return run

    async def wait(self, run_id: str, tenant_id: str, timeout: float) -> ActionOutcome | None:
        """Long-poll: return once the run changes or reaches a final state, or at ``timeout``."""
        run = await self.get_run(run_id, tenant_id)
        if run is None or run.is_terminal or timeout <= 0:
            return outcome_of(run) if run is not None else None
        await self.store.wait_for_change(run_id, run.version, timeout)
        return await self.get(run_id, tenant_id)

    # --------------------------------------------------------------- approvals
    async def decide(self, run_id: str, tenant_id: str, request: DecisionRequest) -> DecisionResult:
        """Record one approver's decision; on the last needed approval, resume and dispatch."""
        return await shielded(self._decide(run_id, tenant_id, request), self._tasks)

    async def _decide(
        self, run_id: str, tenant_id: str, request: DecisionRequest
    ) -> DecisionResult:
        for _ in range(_MAX_CAS_ATTEMPTS):
            run = await self.load(run_id)
            if run is None or run.tenant_id != tenant_id:
                return DecisionResult(Code.ACTION_RUN_NOT_FOUND, None, accepted=False)
            if run.status is not RunStatus.WAITING_APPROVAL or run.approval is None:
                code = (
                    Code.APPROVAL_EXPIRED
                    if run.status is RunStatus.EXPIRED
                    else Code.APPROVAL_NOT_PENDING
                )
                return DecisionResult(code, outcome_of(run), accepted=False)
            if self._overdue(run):
                await self._expire(run)
                current = await self.load(run_id)
                assert current is not None
                return DecisionResult(Code.APPROVAL_EXPIRED, outcome_of(current), accepted=False)
            state = run.approval
            approver = request.approver
            if approver.id == run.principal.id or not approver.has_any_role(state.approver_roles):
                return DecisionResult(Code.APPROVER_NOT_ELIGIBLE, outcome_of(run), accepted=False)
            if state.decided_by(approver.id) is not None:
                return DecisionResult(
                    Code.APPROVAL_ALREADY_DECIDED, outcome_of(run), accepted=False
                )
            now = self.clock.now()
            decision = ApprovalDecision(
                approver_id=approver.id,
                roles=approver.roles,
                decision=request.vote,
                reason=request.reason,
                at=now,
                channel=request.channel,
                via=request.via,
            )
            state = state.model_copy(update={"decisions": (*state.decisions, decision)})
            audit = {"vote": str(request.vote), "reason": request.reason, "via": request.via}

            if request.vote is ApprovalVote.REJECT:
                result = ExecutionResult.denied(
                    Code.APPROVAL_REJECTED, request.reason or "Rejected by an approver."
                )
                outcome = await self._terminal_cas(
                    run, result, "approval_rejected", approver.id, audit, approval=state
                )
                if outcome is None:
                    continue
                return DecisionResult(Code.APPROVAL_REJECTED, outcome, accepted=True)

            action = self.registry.resolve(run.action_id)
            if action is not None and not self._quorum(action, run, state):
                waiting = run.advance(RunStatus.WAITING_APPROVAL, now, approval=state)
                stored = await self._cas_with_audit(
                    run, waiting, "approval_recorded", approver.id, audit
                )
                if stored is None:
                    continue
                return DecisionResult(Code.APPROVAL_RECORDED, outcome_of(stored), accepted=True)

            outcome = await self._resume(run, action, state, approver.id, audit)
            if outcome is None:
                continue
            return DecisionResult(outcome.code, outcome, accepted=True)
        raise RuntimeError(f"decide on {run_id}: too much contention")

    def _quorum(self, action: CompiledAction, run: ActionRun, state: ApprovalState) -> bool:
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
        now = self.clock.now()
        refusal: ExecutionResult | None = None
        if action is None:
            refusal = ExecutionResult.denied(
                Code.ACTION_NOT_REGISTERED, f"{run.action_id} is no longer registered."
            )
        else:
            invalid = self._validate(action, run.input)
            if invalid is not None:
                refusal = invalid
            else:
                decision = evaluate_policy(action, self._policy_input(run, now))
                if decision.denial is not None:
                    refusal = ExecutionResult.denied(
                        Code.POLICY_REVALIDATION_DENIED,
                        f"Current policy refuses it ({decision.denial.code}): "
                        f"{decision.denial.message}",
                    ).model_copy(update={"output": {"policy_code": decision.denial.code}})
                elif decision.resource != run.resource:
                    refusal = ExecutionResult.denied(
                        Code.POLICY_REVALIDATION_DENIED, "The resource identity changed."
                    )
        if refusal is not None:
            return await self._terminal_cas(
                run, refusal, "resume_refused", approver_id, audit, approval=state
            )
        assert action is not None
        started = self._start_attempt(run, now, approval=state)
        stored = await self._cas_with_audit(
            run,
            started,
            "approved_dispatching",
            approver_id,
            {**audit, "revision": action.revision},
        )
        if stored is None:
            return None
        if action.definition.mode is ExecutorMode.ASYNC:
            # Approved work is never refused for a full lane: it queues behind the running limit.
            self.lane.force_acquire()
        return await self.dispatch(action, stored)

    async def _cas_with_audit(
        self,
        run: ActionRun,
        updated: ActionRun,
        kind: str,
        actor: str,
        data: dict[str, str | None],
    ) -> ActionRun | None:
        async with self.store.unit() as unit:
            stored = await unit.runs.compare_and_set(run.version, updated)
            if stored is not None:
                await unit.audit.append(
                    [event(stored, kind, updated.updated_at, actor=actor, **data)]
                )
        return stored

    async def _terminal_cas(
        self,
        run: ActionRun,
        result: ExecutionResult,
        kind: str,
        actor: str,
        data: dict[str, str | None],
        **changes: object,
    ) -> ActionOutcome | None:
        """Like ``finish`` but reports a lost race as ``None`` so the caller can re-read."""
        now = self.clock.now()
        final = run.advance(terminal_status_for(result), now, result=result, **changes)
        async with self.store.unit() as unit:
            stored = await unit.runs.compare_and_set(run.version, final)
            if stored is None:
                return None
            if run.duplicate_scope is not None:
                await unit.duplicates.complete(run.duplicate_scope, run.run_id, result, now)
            await unit.audit.append(
                [event(stored, kind, now, actor=actor, code=result.code, **data)]
            )
        return outcome_of(stored)

    # ------------------------------------------------------------------ expiry
    def _overdue(self, run: ActionRun) -> bool:
        return (
            run.status is RunStatus.WAITING_APPROVAL
            and run.approval is not None
            and run.approval.expires_at is not None
            and run.approval.expires_at <= self.clock.now()
        )

    async def _expire(self, run: ActionRun) -> bool:
        result = ExecutionResult.denied(Code.APPROVAL_EXPIRED, "Nobody approved it in time.")
        outcome = await self._terminal_cas(run, result, "approval_expired", "signoff", {})
        return outcome is not None

    async def expire_overdue(self, limit: int = 1000) -> int:
        """The sweeper: move every overdue approval to EXPIRED. Returns how many it moved."""
        async with self.store.unit() as unit:
            waiting = await unit.runs.list(statuses=[RunStatus.WAITING_APPROVAL], limit=limit)
        moved = 0
        for run in waiting:
            if self._overdue(run) and await self._expire(run):
                moved += 1
        return moved

    # ------------------------------------------------------------ cancellation
    async def cancel(self, run_id: str, tenant_id: str, principal: Principal) -> ActionOutcome:
        """Cancel before dispatch. A running synchronous run is never reported cancelled."""
        return await shielded(self._cancel(run_id, tenant_id, principal), self._tasks)

    async def _cancel(self, run_id: str, tenant_id: str, principal: Principal) -> ActionOutcome:
        for _ in range(_MAX_CAS_ATTEMPTS):
            run = await self.get_run(run_id, tenant_id)
            if run is None:
                return self.not_found(run_id)
            # Refusals keep the run's own status and say in ``code`` what happened to the request.
            if run.is_terminal:
                return outcome_of(
                    run,
                    code=Code.ACTION_RUN_ALREADY_TERMINAL,
                    message="The run already finished; nothing was cancelled.",
                )
            if not self._may_cancel(run, principal):
                return outcome_of(
                    run,
                    code=Code.POLICY_DENIED,
                    message="Only the proposer or an approver of this run may cancel it.",
                )
            if run.status not in _CANCELLABLE and not self._queued(run):
                return outcome_of(
                    run,
                    code=Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING,
                    message="The action is already executing; it cannot be cancelled now.",
                )
            result = ExecutionResult.cancelled(message=f"Cancelled by {principal.id}.")
            outcome = await self._terminal_cas(
                run, result, "cancelled", principal.id, {"previous": str(run.status)}
            )
            if outcome is not None:
                return outcome
        raise RuntimeError(f"cancel on {run_id}: too much contention")

    @staticmethod
    def _queued(run: ActionRun) -> bool:
        """Background work committed RUNNING but not yet claimed for dispatch."""
        return (
            run.status is RunStatus.RUNNING
            and run.executor_mode == ExecutorMode.ASYNC
            and run.dispatched_at is None
        )

    @staticmethod
    def _may_cancel(run: ActionRun, principal: Principal) -> bool:
        if principal.id == run.principal.id:
            return True
        return run.approval is not None and principal.has_any_role(run.approval.approver_roles)

    @staticmethod
    def not_found(run_id: str) -> ActionOutcome:
        return ActionOutcome(
            run_id=run_id,
            action="",
            status=ExecutionStatus.DENIED,
            code=Code.ACTION_RUN_NOT_FOUND,
            retry=RetryDisposition.NEVER,
            message="No such run.",
        )
