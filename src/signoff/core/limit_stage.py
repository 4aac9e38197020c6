"""Cumulative limits in the pipeline: which checks a run makes, and what an exceeded limit does.

- ``checks_for``: one ``LimitCheck`` per ``spec.limits`` entry, with the run's subject and the
  CEL ``sum`` evaluated on its input (fail closed: an expression that is not a finite,
  non-negative number denies with ``POLICY_EVALUATION_ERROR``).
- ``denial``: ``LIMIT_EXCEEDED`` / ``NEVER``, naming each exceeded ``deny`` limit and when it
  frees up.
- ``approval_reason``: which ``approval`` limits are exceeded and how far, for
  ``approval.reason``.
- ``releases``: whether a run ending this way gives its reservations back (it never executed).

The atomic part (lock, measure, hold) is ``limits.reserve``, run by the ledger inside the unit of
work that also reserves the duplicate scope.
"""

from __future__ import annotations

import math
from datetime import datetime

from signoff.core import admission, substance
from signoff.core.approval_digest import approval_digest
from signoff.core.codes import Code
from signoff.core.limits import LimitCheck, LimitDecision, subject_of
from signoff.core.policy import PolicyInput, cel_variables
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, ApprovalState, RunStatus

from signoff.core.cel_expr import CelEvaluationError  # isort: skip


def checks_for(
    action: CompiledAction, run: ActionRun, request: PolicyInput
) -> list[LimitCheck] | ExecutionResult:
    checks: list[LimitCheck] = []
    variables = cel_variables(action, request, run.resource) if action.limit_sums else {}
    for spec, expr in zip(action.definition.limits, action.limit_sums, strict=True):
        amount = 0.0
        if expr is not None:
            try:
                value = expr.evaluate(variables)
            except CelEvaluationError:
                value = None
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                return ExecutionResult.denied(
                    Code.POLICY_EVALUATION_ERROR,
                    f"The sum of limit {spec.name!r} is not a non-negative number; denied.",
                )
            amount = float(value)
        subject = subject_of(spec, run.tenant_id, run.principal.id, run.resource)
        checks.append(LimitCheck(spec, run.action_id, run.tenant_id, subject, amount))
    return checks


def denial(decision: LimitDecision) -> ExecutionResult:
    parts = [f"{u.describe()}; {u.frees_up()}" for u in decision.denied]
    result = ExecutionResult.denied(
        Code.LIMIT_EXCEEDED, "Over the " + " and the ".join(parts) + "."
    )
    return result.model_copy(
        update={"output": {"limits": [u.check.spec.name for u in decision.denied]}}
    )


def approval_reason(decision: LimitDecision) -> str:
    return "Over the " + " and the ".join(u.describe() for u in decision.exceeded) + "."


def never_executed(run: ActionRun, status: RunStatus) -> bool:
    """A run ending in ``status`` never executed: denied (policy, guard, limits, digest),
    expired, or cancelled before it was dispatched."""
    if status in (RunStatus.DENIED, RunStatus.EXPIRED):
        return True
    return status is RunStatus.CANCELLED and run.dispatched_at is None


def releases(run: ActionRun, status: RunStatus) -> bool:
    """A run ending in ``status`` gives its limit reservations back when it never executed."""
    return bool(run.limits_held) and never_executed(run, status)


def releases_scope(run: ActionRun, status: RunStatus) -> bool:
    """A repair (``repair.py``) that ends without executing gives back its claim on the run it
    re-dispatches, so another repair may be asked for; every other scope keeps its first
    terminal result for the duplicates that follow."""
    return run.repair_of is not None and never_executed(run, status)


def checks_for_run(
    action: CompiledAction, run: ActionRun, request: PolicyInput
) -> list[LimitCheck] | ExecutionResult:
    """``checks_for``, except that a repair holds no limit: it repeats an operation the run it
    repairs already counts."""
    return [] if run.repair_of is not None else checks_for(action, run, request)


def digest_of(action: CompiledAction, run: ActionRun, *, revision: str | None = None) -> str:
    """The approval digest of what ``run`` would execute under ``action`` as it is now (under
    ``revision``, the revision the approval is asked under, when another instance holds it)."""
    return approval_digest(
        action_id=run.action_id,
        definition_revision=revision if revision is not None else action.revision,
        input=substance.will_run(run),
        resource=run.resource,
        principal_id=run.principal.id,
        principal_roles=run.principal.roles,
        tenant_id=run.tenant_id,
    )


def requested_approval(
    action: CompiledAction,
    run: ActionRun,
    now: datetime,
    reason: str | None = None,
    *,
    count: int | None = None,
) -> ApprovalState:
    """The approval ``run`` will wait for (``count``: the policy's, possibly escalated, number),
    bound to its digest (and a limit's reason)."""
    state = admission.approval_state(action, now, count)
    return state.model_copy(update={"digest": digest_of(action, run), "reason": reason})
