"""``Cancellation``: who may cancel a run, and when it can still be stopped.

Before dispatch (and background work not yet claimed) a run is cancelled by compare-and-set;
deferred work is asked to stop through its cancel hook (``External``); a synchronous run that is
executing is never reported cancelled. Refusals keep the run's own status and say in ``code``
what happened to the request.
"""

from __future__ import annotations

from signoff.core.answers import not_found, outcome_of
from signoff.core.approvals import Approvals
from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code
from signoff.core.definition import ExecutorMode
from signoff.core.external import External
from signoff.core.identity import Principal
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus

_CANCELLABLE = frozenset(
    {
        RunStatus.REQUESTED,
        RunStatus.VALIDATING,
        RunStatus.POLICY_EVALUATED,
        RunStatus.WAITING_APPROVAL,
    }
)


def queued(run: ActionRun) -> bool:
    """Background work committed RUNNING but not yet claimed for dispatch."""
    return (
        run.status is RunStatus.RUNNING
        and run.executor_mode == ExecutorMode.ASYNC
        and run.dispatched_at is None
    )


def may_cancel(run: ActionRun, principal: Principal) -> bool:
    """The proposer, or anyone holding a role the run's approval names."""
    if principal.id == run.principal.id:
        return True
    return run.approval is not None and principal.has_any_role(run.approval.approver_roles)


class Cancellation:
    def __init__(self, ledger: RunLedger, approvals: Approvals, external: External) -> None:
        self._ledger = ledger
        self._approvals = approvals
        self._external = external

    async def cancel(self, run_id: str, tenant_id: str, principal: Principal) -> ActionOutcome:
        """Cancel before dispatch, or external work through its cancel hook."""
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            if run is None:
                return not_found(run_id)
            run = await self._approvals.settled(run)
            if run.is_terminal:
                return outcome_of(
                    run,
                    code=Code.ACTION_RUN_ALREADY_TERMINAL,
                    message="The run already finished; nothing was cancelled.",
                )
            if not may_cancel(run, principal):
                return outcome_of(
                    run,
                    code=Code.POLICY_DENIED,
                    message="Only the proposer or an approver of this run may cancel it.",
                )
            if run.status is RunStatus.WAITING_EXTERNAL:
                external = await self._external.cancel(run, principal.id)
                if external is not None:
                    return external
                continue
            if run.status not in _CANCELLABLE and not queued(run):
                return outcome_of(
                    run,
                    code=Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING,
                    message="The action is already executing; it cannot be cancelled now.",
                )
            result = ExecutionResult.cancelled(message=f"Cancelled by {principal.id}.")
            outcome = await self._ledger.terminal(
                run,
                result,
                AuditKind.CANCELLED,
                actor=principal.id,
                data={"previous": str(run.status)},
            )
            if outcome is not None:
                return outcome
        raise RuntimeError(f"cancel on {run_id}: too much contention")
