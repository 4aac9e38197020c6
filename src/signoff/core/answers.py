"""How a stored run reads to a caller, and which terminal state a result lands in."""

from __future__ import annotations

from typing import Any

from signoff.core import substance
from signoff.core.approval_digest import short_digest
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.results import ActionOutcome, ApprovalSummary, ExecutionResult
from signoff.core.run import NON_TERMINAL_STATUSES, ActionRun, RunStatus

_TERMINAL_FOR = {
    ExecutionStatus.SUCCEEDED: RunStatus.SUCCEEDED,
    ExecutionStatus.FAILED: RunStatus.FAILED,
    ExecutionStatus.DENIED: RunStatus.DENIED,
    ExecutionStatus.VALIDATION_FAILED: RunStatus.DENIED,
    ExecutionStatus.CANCELLED: RunStatus.CANCELLED,
}


# Stored lifecycle states a run shown with a given status can be in: a superset, narrowed by
# comparing each run's outcome, so the table only has to be generous, never exact.
_FINAL_ERRORS = frozenset(
    {RunStatus.FAILED, RunStatus.DENIED, RunStatus.EXPIRED, RunStatus.RUNTIME_FAILED}
)
_CANDIDATES: dict[ExecutionStatus, frozenset[RunStatus]] = {
    ExecutionStatus.SUCCEEDED: frozenset({RunStatus.SUCCEEDED}),
    ExecutionStatus.FAILED: _FINAL_ERRORS,
    ExecutionStatus.DENIED: _FINAL_ERRORS,
    ExecutionStatus.VALIDATION_FAILED: _FINAL_ERRORS,
    ExecutionStatus.CANCELLED: frozenset({RunStatus.CANCELLED}),
    ExecutionStatus.PENDING_APPROVAL: frozenset({RunStatus.WAITING_APPROVAL}),
    ExecutionStatus.ACCEPTED: NON_TERMINAL_STATUSES,
}


def stored_statuses_for(status: ExecutionStatus) -> frozenset[RunStatus]:
    """Every stored state a run whose outcome reads ``status`` may be in (a superset: compare
    each candidate's outcome to narrow it)."""
    return _CANDIDATES[status]


def terminal_status_for(result: ExecutionResult) -> RunStatus:
    if result.code in (Code.APPROVAL_EXPIRED, Code.CONFIRMATION_EXPIRED):
        return RunStatus.EXPIRED
    if result.code == Code.ACTION_RUNTIME_FAILED:
        return RunStatus.RUNTIME_FAILED
    return _TERMINAL_FOR[result.status]


def approval_summary(run: ActionRun) -> ApprovalSummary | None:
    state = run.approval
    if state is None:
        return None
    return ApprovalSummary(
        approval_id=state.approval_id,
        expires_at=state.expires_at,
        approvals_needed=state.count,
        approvals_received=len(substance.standing_approvers(run)),
        approver_roles=state.approver_roles,
        reason=state.reason,
        digest=short_digest(state.digest) or None,
    )


def outcome_of(run: ActionRun, **overrides: Any) -> ActionOutcome:
    """The caller's view of ``run``; ``overrides`` replace fields (e.g. a decision's own code)."""
    fields: dict[str, Any]
    if run.result is not None:
        result = run.result
        fields = {
            "status": result.status,
            "code": result.code,
            "retry": result.retry,
            "message": result.message,
            "output": result.output,
        }
    elif run.status is RunStatus.WAITING_APPROVAL:
        summary = approval_summary(run)
        assert summary is not None
        missing = summary.approvals_needed - summary.approvals_received
        roles = ", ".join(summary.approver_roles)
        fields = {
            "status": ExecutionStatus.PENDING_APPROVAL,
            "code": Code.APPROVAL_REQUIRED,
            "retry": RetryDisposition.AFTER_APPROVAL,
            "message": f"Waiting for {missing} approval(s) from role {roles}.",
        }
        if run.approval is not None and run.approval.awaits_confirmation:
            fields.update(
                code=Code.CONFIRMATION_REQUIRED,
                message="Waiting for your own confirmation of exactly what will run "
                "(asked in your MCP host).",
            )
    elif run.status is RunStatus.WAITING_EXTERNAL:
        fields = {
            "status": ExecutionStatus.ACCEPTED,
            "code": Code.ACTION_DEFERRED,
            "retry": RetryDisposition.NEVER,
            "message": "Dispatched; waiting for the external system to complete it.",
        }
    else:
        fields = {
            "status": ExecutionStatus.ACCEPTED,
            "code": Code.ACTION_ACCEPTED,
            "retry": RetryDisposition.NEVER,
            "message": "Accepted; poll signoff_get_run for the result.",
        }
    fields.update(
        run_id=run.run_id,
        action=run.action_id,
        duplicate_of=run.duplicate_of,
        amended=run.approved_input is not None,
        approved_input=substance.will_run(run) if run.approved_input is not None else None,
        approval=approval_summary(run) if run.status is RunStatus.WAITING_APPROVAL else None,
    )
    fields.update(overrides)
    return ActionOutcome(**fields)


def not_found(run_id: str) -> ActionOutcome:
    """The answer for a run that does not exist in the caller's tenant (never disclosed)."""
    return ActionOutcome(
        run_id=run_id,
        action="",
        status=ExecutionStatus.DENIED,
        code=Code.ACTION_RUN_NOT_FOUND,
        retry=RetryDisposition.NEVER,
        message="No such run.",
    )
