"""What a manifest action's executor and guard may answer: its declared codes, its ``spec.output``.

A manifest lists the codes its executor answers with (``results:``, plus an HTTP executor's own),
and may declare the shape of a successful output. The tool's output schema promises exactly that
to the agent, so an answer outside it is the executor's mistake, never the agent's news:

- an undeclared code from the executor is ``ACTION_FAILED`` / ``MANUAL_REVIEW`` (the side effect
  may have happened), from the guard ``PRE_EXECUTION_DENIED`` (nothing happened);
- a ``SUCCEEDED`` output that does not match ``spec.output`` is ``ACTION_FAILED`` /
  ``MANUAL_REVIEW``: the effect happened, but what came back is not what was promised.

The message names the code (when it looks like one) or the output path (never the value); the operator detail (the
validator's message, masked for ``sensitive`` fields) goes to the run's audit trail only. Programmatic definitions (``executor_codes=None``) and actions
without ``spec.output`` are not checked.
"""

from __future__ import annotations

from signoff.core.codes import Code, ExecutionStatus
from signoff.core.disclosure import code_name, redact
from signoff.core.registry import CompiledAction, output_mismatch
from signoff.core.results import ExecutionResult, GuardDecision


def _declared(action: CompiledAction, code: str) -> bool:
    return action.codes is None or code in action.codes


def checked_result(action: CompiledAction, result: ExecutionResult) -> ExecutionResult:
    """``result`` (already mapped through ``results:``), or the failure it amounts to."""
    if not _declared(action, result.code):
        return ExecutionResult.manual_review_failure(
            Code.ACTION_FAILED,
            f"The executor answered with {code_name(result.code)}, which this action does not "
            "declare; its effect may have happened.",
        ).model_copy(update={"detail": redact(f"undeclared code {result.code}: {result.message}")})
    if result.status is ExecutionStatus.SUCCEEDED and action.output_validator is not None:
        mismatch = output_mismatch(action, result.output if result.output is not None else {})
        if mismatch is not None:
            where = mismatch.split(":", 1)[0] or "/"
            return ExecutionResult.manual_review_failure(
                Code.ACTION_FAILED,
                f"The executor's output does not match the action's declared output (at {where}); "
                "its effect happened.",
            ).model_copy(update={"detail": f"output does not match spec.output: {mismatch}"})
    return result


def checked_decision(action: CompiledAction, decision: GuardDecision) -> GuardDecision:
    """``decision``, or ``PRE_EXECUTION_DENIED`` when it denies with an undeclared code."""
    if decision.allowed or _declared(action, decision.code):
        return decision
    return GuardDecision.deny(
        Code.PRE_EXECUTION_DENIED,
        f"The pre-execution check answered with {code_name(decision.code)}, which this action "
        "does not declare.",
    ).model_copy(update={"detail": redact(f"undeclared code {decision.code}: {decision.message}")})
