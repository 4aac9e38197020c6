"""Which result codes a call of one action can answer with: the enum of its typed output schema.

Over-inclusion is harmless (a client just never sees that code); leaving a code out would make a
client that validates results against the advertised schema reject a real answer. So the catalog
is the starting point, minus the codes that only answer other requests (an approver's decision, a
cancel, a callback, authentication), minus deferred-only codes for other modes, plus the action's
own codes: its deny rules, its ``results:`` and its executor's declared codes.
"""

from __future__ import annotations

from signoff.core.codes import Code
from signoff.core.definition import ActionDefinition, ExecutorMode

NOT_A_CALL_OUTCOME = frozenset(
    {
        Code.APPROVAL_RECORDED,
        Code.APPROVER_NOT_ELIGIBLE,
        Code.APPROVAL_ALREADY_DECIDED,
        Code.APPROVAL_NOT_PENDING,
        Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING,
        Code.ACTION_RUN_ALREADY_TERMINAL,
        Code.ACTION_RUN_NOT_FOUND,
        Code.STALE_ACTION_ATTEMPT,
        Code.ACTION_RESULT_NOT_TERMINAL,
        Code.UNAUTHENTICATED,
        Code.INSUFFICIENT_SCOPE,
    }
)
DEFERRED_ONLY = frozenset(
    {
        Code.ACTION_DEFERRED,
        Code.ACTION_EXTERNAL_TIMEOUT,
        Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED,
    }
)


def possible_codes(definition: ActionDefinition) -> tuple[str, ...] | None:
    """Every code a call of ``definition`` can answer with, sorted; ``None`` when its executor
    may return codes nobody declared (``executor_codes`` unset: a programmatic definition)."""
    if definition.executor_codes is None:
        return None
    codes: set[str] = {str(code) for code in Code} - NOT_A_CALL_OUTCOME
    if definition.mode is not ExecutorMode.DEFERRED:
        codes -= DEFERRED_ONLY
    codes.update(rule.code for rule in definition.policy.deny)
    codes.update(definition.results)
    codes.update(definition.executor_codes)
    return tuple(sorted(codes))
