"""The one catalog of result codes, statuses and retry dispositions (contract §4).

Clients decide on ``status``/``code``/``retry``, never on the human message. Codes are stable across
wording changes; manifests may add domain codes (``results:``) which keep their own names.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """The broad outcome a caller sees."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DENIED = "DENIED"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    PENDING_APPROVAL = "PENDING_APPROVAL"
    ACCEPTED = "ACCEPTED"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        return self not in (ExecutionStatus.PENDING_APPROVAL, ExecutionStatus.ACCEPTED)

    @property
    def is_error(self) -> bool:
        return self in _ERROR_STATUSES


_ERROR_STATUSES = frozenset(
    {
        ExecutionStatus.FAILED,
        ExecutionStatus.DENIED,
        ExecutionStatus.VALIDATION_FAILED,
        ExecutionStatus.CANCELLED,
    }
)


class RetryDisposition(StrEnum):
    """Whether a retry can help, and when."""

    NEVER = "NEVER"
    AFTER_BACKOFF = "AFTER_BACKOFF"
    AFTER_CORRECTION = "AFTER_CORRECTION"
    AFTER_APPROVAL = "AFTER_APPROVAL"
    MANUAL_REVIEW = "MANUAL_REVIEW"


def default_retry(status: ExecutionStatus) -> RetryDisposition:
    """Contract defaults: an unknown failure may have had its side effect, so it needs review."""
    if status is ExecutionStatus.FAILED:
        return RetryDisposition.MANUAL_REVIEW
    if status is ExecutionStatus.VALIDATION_FAILED:
        return RetryDisposition.AFTER_CORRECTION
    if status is ExecutionStatus.PENDING_APPROVAL:
        return RetryDisposition.AFTER_APPROVAL
    return RetryDisposition.NEVER


class Code(StrEnum):
    """Stable result codes. The README's table is generated from ``CODE_DESCRIPTIONS``."""

    SUCCEEDED = "SUCCEEDED"
    ACTION_FAILED = "ACTION_FAILED"
    ACTION_EXECUTION_EXCEPTION = "ACTION_EXECUTION_EXCEPTION"
    ACTION_NOT_REGISTERED = "ACTION_NOT_REGISTERED"
    INPUT_VALIDATION_FAILED = "INPUT_VALIDATION_FAILED"
    POLICY_DENIED = "POLICY_DENIED"
    POLICY_EVALUATION_ERROR = "POLICY_EVALUATION_ERROR"
    POLICY_REVALIDATION_DENIED = "POLICY_REVALIDATION_DENIED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    APPROVAL_RECORDED = "APPROVAL_RECORDED"
    APPROVAL_REJECTED = "APPROVAL_REJECTED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    APPROVER_NOT_ELIGIBLE = "APPROVER_NOT_ELIGIBLE"
    APPROVAL_ALREADY_DECIDED = "APPROVAL_ALREADY_DECIDED"
    APPROVAL_NOT_PENDING = "APPROVAL_NOT_PENDING"
    APPROVAL_RUN_CHANGED = "APPROVAL_RUN_CHANGED"
    AMENDMENT_NOT_ALLOWED = "AMENDMENT_NOT_ALLOWED"
    AMENDMENT_INVALID = "AMENDMENT_INVALID"
    AMENDMENT_DENIED = "AMENDMENT_DENIED"
    AMENDMENT_OVER_LIMIT = "AMENDMENT_OVER_LIMIT"
    PREVIEW_FAILED = "PREVIEW_FAILED"
    APPROVAL_AWAITING_DISPATCH = "APPROVAL_AWAITING_DISPATCH"
    PRE_EXECUTION_DENIED = "PRE_EXECUTION_DENIED"
    DUPLICATE_IN_PROGRESS = "DUPLICATE_IN_PROGRESS"
    IDEMPOTENCY_KEY_REQUIRED = "IDEMPOTENCY_KEY_REQUIRED"
    IDEMPOTENCY_KEY_INVALID = "IDEMPOTENCY_KEY_INVALID"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    ACTION_ACCEPTED = "ACTION_ACCEPTED"
    ACTION_DEFERRED = "ACTION_DEFERRED"
    ACTION_LANE_FULL = "ACTION_LANE_FULL"
    PENDING_APPROVALS_LIMIT = "PENDING_APPROVALS_LIMIT"
    ACTION_CANCELLED = "ACTION_CANCELLED"
    ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED = "ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED"
    ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING = "ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING"
    ACTION_RUN_ALREADY_TERMINAL = "ACTION_RUN_ALREADY_TERMINAL"
    ACTION_RUN_NOT_FOUND = "ACTION_RUN_NOT_FOUND"
    STALE_ACTION_ATTEMPT = "STALE_ACTION_ATTEMPT"
    ACTION_RUNTIME_FAILED = "ACTION_RUNTIME_FAILED"
    ACTION_TIMED_OUT = "ACTION_TIMED_OUT"
    ACTION_EXTERNAL_TIMEOUT = "ACTION_EXTERNAL_TIMEOUT"
    ACTION_INTERRUPTED = "ACTION_INTERRUPTED"
    ACTION_RESULT_NOT_TERMINAL = "ACTION_RESULT_NOT_TERMINAL"
    REPAIR_NOT_APPLICABLE = "REPAIR_NOT_APPLICABLE"
    REPAIR_NOT_IDEMPOTENT = "REPAIR_NOT_IDEMPOTENT"
    REPAIR_IN_PROGRESS = "REPAIR_IN_PROGRESS"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    APPROVAL_DIGEST_MISMATCH = "APPROVAL_DIGEST_MISMATCH"
    INSUFFICIENT_SCOPE = "INSUFFICIENT_SCOPE"
    RECEIPT_RUN_NOT_FINISHED = "RECEIPT_RUN_NOT_FINISHED"
    RECEIPT_NOT_ANCHORED = "RECEIPT_NOT_ANCHORED"
    RECEIPT_NOT_CHAINED = "RECEIPT_NOT_CHAINED"
    RECEIPT_RUN_INCONSISTENT = "RECEIPT_RUN_INCONSISTENT"
    RECEIPT_TRAIL_INCONSISTENT = "RECEIPT_TRAIL_INCONSISTENT"
    RECEIPT_KEYS_MISSING = "RECEIPT_KEYS_MISSING"
    MANIFEST_INVALID = "MANIFEST_INVALID"
    CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
    CONFIRMATION_DECLINED = "CONFIRMATION_DECLINED"
    CONFIRMATION_UNAVAILABLE = "CONFIRMATION_UNAVAILABLE"
    CONFIRMATION_EXPIRED = "CONFIRMATION_EXPIRED"


CODE_DESCRIPTIONS: dict[Code, str] = {
    Code.SUCCEEDED: "The executor completed the action.",
    Code.ACTION_FAILED: "The executor reported a failure without a more specific code.",
    Code.ACTION_EXECUTION_EXCEPTION: "The executor raised; the side effect may have happened.",
    Code.ACTION_NOT_REGISTERED: "No action with this id is registered.",
    Code.INPUT_VALIDATION_FAILED: "The input does not match the action's JSON Schema.",
    Code.POLICY_DENIED: "The principal lacks a permitted role, or a deny rule matched.",
    Code.POLICY_EVALUATION_ERROR: "A policy expression failed at evaluation; denied (fail closed).",
    Code.POLICY_REVALIDATION_DENIED: "At approval resume the current policy or input no longer allows it.",
    Code.APPROVAL_REQUIRED: "Waiting for human approval.",
    Code.APPROVAL_RECORDED: "An approver's decision was recorded; more approvals are needed.",
    Code.APPROVAL_REJECTED: "An approver rejected the run.",
    Code.APPROVAL_EXPIRED: "Nobody decided before the approval expired.",
    Code.APPROVER_NOT_ELIGIBLE: "The approver lacks an approver role or is the proposer.",
    Code.APPROVAL_ALREADY_DECIDED: "This approver already decided this run; counted once.",
    Code.APPROVAL_NOT_PENDING: "The run is not waiting for approval.",
    Code.APPROVAL_RUN_CHANGED: "What will run changed since the version the approver was shown; nothing was recorded: decide again on the fresh view.",
    Code.AMENDMENT_NOT_ALLOWED: "The approver tried to change a field the manifest does not let approvers amend.",
    Code.AMENDMENT_INVALID: "The amended input does not validate or changes the resource; nothing was recorded.",
    Code.AMENDMENT_DENIED: "Policy refuses the amended input; nothing was recorded.",
    Code.AMENDMENT_OVER_LIMIT: "The amended input is over a cumulative limit (on_exceed: approval): the amendment is recorded with the limit's reason and waits for an approval given on that view; this approval was not counted.",
    Code.PREVIEW_FAILED: "The preview (dry run) failed, so nobody was asked to approve; retry later.",
    Code.APPROVAL_AWAITING_DISPATCH: "Approved; a serving signoff process holding the definition revision it was approved under will run it (a CLI decision, or a fleet mid-upgrade).",
    Code.PRE_EXECUTION_DENIED: "The guard refused immediately before dispatch.",
    Code.DUPLICATE_IN_PROGRESS: "A request with this idempotency key is still in progress.",
    Code.IDEMPOTENCY_KEY_REQUIRED: "The action requires an idempotency_key.",
    Code.IDEMPOTENCY_KEY_INVALID: "The idempotency_key must be 1-255 printable ASCII characters.",
    Code.IDEMPOTENCY_KEY_REUSED: "The key was used before with a different input; nothing disclosed.",
    Code.ACTION_ACCEPTED: "Accepted; the work completes in the background.",
    Code.ACTION_DEFERRED: "Dispatched; waiting for the external system to report completion.",
    Code.ACTION_LANE_FULL: "The background lane is full; nothing was started.",
    Code.PENDING_APPROVALS_LIMIT: "Too many of this principal's requests wait for approval; nothing was requested.",
    Code.ACTION_CANCELLED: "The run was cancelled before its side effect.",
    Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED: "Cancelled, but the external cancel hook failed.",
    Code.ACTION_RUN_NOT_CANCELLABLE_WHILE_RUNNING: "A running synchronous run cannot be cancelled.",
    Code.ACTION_RUN_ALREADY_TERMINAL: "The run already finished; its result is unchanged.",
    Code.ACTION_RUN_NOT_FOUND: "No such run in the caller's tenant.",
    Code.STALE_ACTION_ATTEMPT: "The attempt token does not match the run's current attempt.",
    Code.ACTION_RUNTIME_FAILED: "signoff itself failed; the run needs review.",
    Code.ACTION_TIMED_OUT: "The executor did not finish in time; it may have had its effect.",
    Code.ACTION_EXTERNAL_TIMEOUT: "The external system never reported completion (orphan policy).",
    Code.ACTION_INTERRUPTED: "signoff stopped mid-action; the side effect may or may not have happened.",
    Code.ACTION_RESULT_NOT_TERMINAL: "A completion must carry a final result (SUCCEEDED or FAILED).",
    Code.REPAIR_NOT_APPLICABLE: "Only a dispatched MANUAL_REVIEW failure (not deferred work) can be re-dispatched, once: re-dispatch its repair instead.",
    Code.REPAIR_NOT_IDEMPOTENT: "The executor is not idempotent: an operator re-dispatch could repeat its effect.",
    Code.REPAIR_IN_PROGRESS: "This run is being re-dispatched already (one repair at a time); poll the repair run.",
    Code.UNAUTHENTICATED: "No valid credentials.",
    Code.LIMIT_EXCEEDED: "A cumulative limit (on_exceed: deny) is used up; the message says when it frees up.",
    Code.APPROVAL_DIGEST_MISMATCH: "What would run differs from what was approved; nothing ran.",
    Code.INSUFFICIENT_SCOPE: "A valid token of the wrong kind for this surface (403; names the scope).",
    Code.RECEIPT_RUN_NOT_FINISHED: "A receipt is made once the run has finished; this one has not.",
    Code.RECEIPT_NOT_ANCHORED: "No signed checkpoint covers the run's last event yet; ask again after the next checkpoint.",
    Code.RECEIPT_NOT_CHAINED: "The run was recorded before its events chained its substance: no receipt (audit verify still checks it).",
    Code.RECEIPT_RUN_INCONSISTENT: "The stored run is not what its events chained (it was edited): no receipt is made.",
    Code.RECEIPT_TRAIL_INCONSISTENT: "The run's stretch of the chain does not reach its signed checkpoint: no receipt is made.",
    Code.RECEIPT_KEYS_MISSING: "The server holds no audit signing key (or not the checkpoint's key): it cannot sign a receipt.",
    Code.MANIFEST_INVALID: "The manifests given do not load; each problem has its file, line and code.",
    Code.CONFIRMATION_REQUIRED: "Waiting for the requester's own confirmation in the agent's host (approval.confirm); the same principal can confirm it later.",
    Code.CONFIRMATION_DECLINED: "The requester declined (or cancelled) the confirmation; nothing ran.",
    Code.CONFIRMATION_UNAVAILABLE: "The action needs the requester's confirmation and the host cannot ask (no elicitation capability; fallback: refuse); nothing ran.",
    Code.CONFIRMATION_EXPIRED: "The requester did not confirm before the confirmation expired; nothing ran.",
}
