"""``External``: the far side of deferred execution — authenticated completion, external
cancellation, and orphans past their deadline.

A deferred run is committed RUNNING with a fresh attempt token before dispatch, and
WAITING_EXTERNAL after the external system accepted the work (the ``Dispatcher`` hands it over).
Its operation id (``run_id:attempt_token``) is deterministic, so a re-dispatch is idempotent at the
receiver. Dispatch is at-least-once capable, never exactly-once: receivers must deduplicate by
operation id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from signoff.core.answers import outcome_of
from signoff.core.audit_events import Actor, AuditKind
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import ExecutorMode, OrphanPolicy
from signoff.core.disclosure import raised, redact, told
from signoff.core.dispatch import call_hook, context_for, normalize_result
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus


@dataclass(frozen=True, slots=True)
class CompletionResult:
    """``accepted``: this completion decided the run. Otherwise ``code`` says why not."""

    code: str
    outcome: ActionOutcome | None
    accepted: bool


class External:
    """Owns completion, cancellation and orphan handling of work handed to an external system."""

    def __init__(self, registry: ActionRegistry, ledger: RunLedger, clock: Clock) -> None:
        self._registry = registry
        self._ledger = ledger
        self._clock = clock

    # -------------------------------------------------------------- completion
    async def complete(
        self, run_id: str, token: str, result: ExecutionResult, tenant_id: str | None
    ) -> CompletionResult:
        """Record the external system's final result for the attempt holding ``token``
        (``tenant_id=None``: a trusted in-process caller). A repeated completion answers the
        stored result; a stale token is refused."""
        if result.status not in (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED):
            return CompletionResult(Code.ACTION_RESULT_NOT_TERMINAL, None, accepted=False)
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            if run is None:
                return CompletionResult(Code.ACTION_RUN_NOT_FOUND, None, accepted=False)
            if run.attempt_token is None or run.attempt_token != token:
                return CompletionResult(Code.STALE_ACTION_ATTEMPT, None, accepted=False)
            if run.is_terminal:
                stored = outcome_of(run)
                return CompletionResult(stored.code, stored, accepted=False)
            awaiting = run.status is RunStatus.WAITING_EXTERNAL or (
                run.status is RunStatus.RUNNING and run.executor_mode == ExecutorMode.DEFERRED
            )
            if not awaiting:
                return CompletionResult(Code.STALE_ACTION_ATTEMPT, None, accepted=False)
            action = self._registry.resolve(run.action_id)
            final = normalize_result(action, result) if action is not None else result
            outcome = await self._ledger.terminal(
                run, final, AuditKind.EXTERNAL_COMPLETED, actor=Actor.EXTERNAL
            )
            if outcome is not None:
                return CompletionResult(outcome.code, outcome, accepted=True)
        raise RuntimeError(f"complete on {run_id}: too much contention")

    # ------------------------------------------------------------ cancellation
    async def cancel(self, run: ActionRun, actor: str) -> ActionOutcome | None:
        """Ask the external system to stop (idempotent hook), then record CANCELLED.

        CANCELLED is signoff's terminal decision, not proof the external work stopped; a failing
        or missing hook says so with MANUAL_REVIEW. ``None``: a completion won the race.
        """
        action = self._registry.resolve(run.action_id)
        hook = action.definition.cancel if action is not None else None
        if hook is None:
            result = ExecutionResult.cancelled(
                message="Cancelled; no cancel hook, so the external operation may still complete.",
                retry=RetryDisposition.MANUAL_REVIEW,
            )
        else:
            problem: str | None = None
            try:
                answer: Any = await call_hook(hook, context_for(run))
            except Exception as exc:
                problem = raised("cancel hook", exc)
            else:
                problem = _not_stopped(answer)
            result = (
                ExecutionResult.cancelled(message=f"Cancelled by {actor}.")
                if problem is None
                else ExecutionResult.cancelled(
                    Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED,
                    told(Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED),
                    retry=RetryDisposition.MANUAL_REVIEW,
                ).model_copy(update={"detail": problem})
            )
        return await self._ledger.terminal(
            run, result, AuditKind.CANCELLED, actor=actor, data={"previous": str(run.status)}
        )

    # ----------------------------------------------------------------- orphans
    async def sweep(self, limit: int = 1000) -> int:
        """Apply the orphan policy to every WAITING_EXTERNAL run past its deadline, paging
        ``limit`` at a time, oldest first, through all of them."""
        now = self._clock.now()
        handled = 0
        async for run in self._ledger.every(RunStatus.WAITING_EXTERNAL, limit):
            if run.deadline_at is None or run.deadline_at > now:
                continue
            action = self._registry.resolve(run.action_id)
            policy = action.definition.orphan if action is not None else OrphanPolicy.MANUAL_REVIEW
            if policy is OrphanPolicy.CANCEL:
                outcome = await self.cancel(run, "signoff")
            else:
                failure = ExecutionResult.manual_review_failure(
                    Code.ACTION_EXTERNAL_TIMEOUT, "The external system never reported completion."
                )
                outcome = await self._ledger.terminal(
                    run, failure, AuditKind.EXTERNAL_TIMEOUT, actor=Actor.SIGNOFF
                )
            handled += outcome is not None
        return handled


def _not_stopped(answer: Any) -> str | None:
    """Why a cancel hook's answer does not confirm the stop (operator detail), or ``None``."""
    if answer is False:
        return "cancel hook answered False"
    if isinstance(answer, ExecutionResult) and answer.status is ExecutionStatus.FAILED:
        return redact(f"cancel hook answered {answer.code}: {answer.message}")
    return None
