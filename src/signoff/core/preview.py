"""Previews (``spec.preview``): a dry run before anyone is asked to approve.

Owns running the action's preview hook once, before the approval request is committed: its JSON
output is what approvers see, and its digest (SHA-256 of the canonical JSON) is stored on the run
and handed to the guard with the output, so a guard can refuse when the world changed since the
preview. A preview that raises or does not answer with a JSON object ends the run before any
approver is asked (``PREVIEW_FAILED``); a preview may also refuse with its own result code.
"""

from __future__ import annotations

import json
from datetime import datetime

from signoff.core import substance
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.disclosure import raised, told
from signoff.core.dispatch import call_hook, normalize_result
from signoff.core.proposal import canonical_hash
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionContext, ExecutionResult
from signoff.core.run import ActionRun, PreviewRecord

MAX_PREVIEW_BYTES = 64 * 1024


def _failed(message: str) -> ExecutionResult:
    # A dry run has no side effect, so trying again later is always safe.
    return ExecutionResult.retryable_failure(Code.PREVIEW_FAILED, message)


async def run_preview(
    action: CompiledAction, run: ActionRun, now: datetime
) -> PreviewRecord | ExecutionResult:
    """The preview's record, or the result that ends the run (nothing reserved, nobody asked)."""
    hook = action.definition.preview
    assert hook is not None
    context = ExecutionContext(
        run_id=run.run_id,
        action_id=run.action_id,
        tenant_id=run.tenant_id,
        principal=run.principal,
        input=substance.will_run(run),
        resource=run.resource,
        attempt_token="preview",
        operation_id=f"{run.run_id}:preview",
    )
    try:
        value = await call_hook(hook, context)
    except Exception as exc:
        return _failed(told(Code.PREVIEW_FAILED)).model_copy(
            update={"detail": raised("preview", exc)}
        )
    if isinstance(value, ExecutionResult):
        result = normalize_result(action, value)
        if result.status is not ExecutionStatus.SUCCEEDED:
            return result
        value = result.output or {}
    if not isinstance(value, dict):
        return _failed("The preview did not answer with a JSON object.")
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _failed("The preview's answer is not JSON.")
    if size > MAX_PREVIEW_BYTES:
        return _failed("The preview's answer is too large to show approvers.")
    return PreviewRecord(output=value, digest=canonical_hash(value), at=now)
