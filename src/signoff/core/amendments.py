"""Amend before approve (``approval.amend``): an approver changes listed input fields.

Owns the rule for an amendment, decided in memory before the decision is written: only fields
the manifest lists may change; the amended input passes the input limits and the schema again,
current policy again (a deny rule may now apply), and must keep the run's resource identity. The
run keeps the proposed input and the approved input separately; the guard, the limits at resume
and the executor see the approved one. Pure: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from signoff.core import admission, substance
from signoff.core.codes import Code
from signoff.core.input_limits import check_input
from signoff.core.policy import evaluate_policy
from signoff.core.registry import CompiledAction
from signoff.core.run import ActionRun

MAX_AMENDED_FIELDS = 32


class AmendmentRefused(Exception):
    """``code`` is the stable reason; the message is safe to show the approver."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def amended(
    action: CompiledAction,
    run: ActionRun,
    approver_id: str,
    changes: Mapping[str, Any],
    now: datetime,
) -> ActionRun:
    """``run`` (not committed) carrying the approved input and the record of this amendment."""
    allowed = set(action.definition.approval.amend)
    if run.approval is not None and run.approval.confirmation is not None:
        raise AmendmentRefused(
            Code.AMENDMENT_NOT_ALLOWED,
            "The requester confirmed exactly this input (approval.confirm); it cannot be amended.",
        )
    if not changes or len(changes) > MAX_AMENDED_FIELDS:
        raise AmendmentRefused(
            Code.AMENDMENT_NOT_ALLOWED, "An amendment changes at least one field."
        )
    refused = sorted(str(name) for name in changes if name not in allowed)
    if refused:
        listed = ", ".join(sorted(allowed)) or "none"
        raise AmendmentRefused(
            Code.AMENDMENT_NOT_ALLOWED,
            f"Only these fields may be amended: {listed}; not {', '.join(refused)[:200]}.",
        )
    proposed = {**substance.will_run(run), **changes}
    violation = check_input(proposed)
    if violation is not None:
        raise AmendmentRefused(Code.AMENDMENT_INVALID, violation.message)
    invalid = admission.validate(action, proposed)
    if invalid is not None:
        raise AmendmentRefused(Code.AMENDMENT_INVALID, invalid.message)
    decision = evaluate_policy(action, admission.policy_input(run, now, proposed))
    if decision.denial is not None:
        raise AmendmentRefused(
            Code.AMENDMENT_DENIED,
            f"Policy refuses the amended input ({decision.denial.code}): {decision.denial.message}",
        )
    if decision.resource != run.resource:
        raise AmendmentRefused(
            Code.AMENDMENT_INVALID, "An amendment may not change which resource the action is for."
        )
    changed = substance.with_amendment(run, approver_id, changes, now)
    state = changed.approval
    if state is not None and decision.approvals_needed > state.count:
        # A higher tier now applies (escalate): the run waits for more approvers.
        return changed.model_copy(
            update={"approval": state.model_copy(update={"count": decision.approvals_needed})}
        )
    return changed
