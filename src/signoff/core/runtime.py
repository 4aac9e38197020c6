"""``Runtime``: everything a surface calls — proposals, decisions, reads, cancellation,
external completion and recovery — assembled from one module per concern."""

from __future__ import annotations

from signoff.core.approvals import DecisionRequest, DecisionResult
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import ExecutorMode
from signoff.core.dispatch import shielded
from signoff.core.identity import Principal
from signoff.core.outcomes import outcome_of
from signoff.core.pipeline import MAX_CAS_ATTEMPTS
from signoff.core.recovery import RecoveryFlow
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus

__all__ = ["DecisionRequest", "DecisionResult", "Runtime"]

_CANCELLABLE = frozenset(
    {
        RunStatus.REQUESTED,
        RunStatus.VALIDATING,
        RunStatus.POLICY_EVALUATED,
        RunStatus.WAITING_APPROVAL,
    }
)


class Runtime(RecoveryFlow):
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

    # ------------------------------------------------------------ cancellation
    async def cancel(self, run_id: str, tenant_id: str, principal: Principal) -> ActionOutcome:
        """Cancel before dispatch, or external work through its cancel hook. A running synchronous
        run is never reported cancelled."""
        return await shielded(self._cancel(run_id, tenant_id, principal), self._tasks)

    async def _cancel(self, run_id: str, tenant_id: str, principal: Principal) -> ActionOutcome:
        for _ in range(MAX_CAS_ATTEMPTS):
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
            if run.status is RunStatus.WAITING_EXTERNAL:
                external = await self.cancel_external(run, principal.id)
                if external is not None:
                    return external
                continue
            if run.status not in _CANCELLABLE and not self._queued(run):
                return outcome_of(
                    run,
                    code=Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING,
                    message="The action is already executing; it cannot be cancelled now.",
                )
            result = ExecutionResult.cancelled(message=f"Cancelled by {principal.id}.")
            outcome = await self.terminal_cas(
                run, result, "cancelled", actor=principal.id, data={"previous": str(run.status)}
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
