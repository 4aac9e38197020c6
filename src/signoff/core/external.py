"""Deferred execution: dispatch, authenticated completion, external cancellation, orphans.

A deferred run is committed RUNNING with a fresh attempt token before dispatch, and
WAITING_EXTERNAL after the external system accepted the work. Its operation id
(``run_id:attempt_token``) is deterministic, so a re-dispatch is idempotent at the receiver.
Dispatch is at-least-once capable, never exactly-once: receivers must deduplicate by operation id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from signoff.core.approvals import ApprovalFlow
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.compiled import CompiledAction
from signoff.core.definition import ExecutorMode, OrphanPolicy
from signoff.core.dispatch import call_hook, normalize_result, run_guard, shielded
from signoff.core.outcomes import outcome_of
from signoff.core.pipeline import MAX_CAS_ATTEMPTS
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus


@dataclass(frozen=True, slots=True)
class CompletionResult:
    """``accepted``: this completion decided the run. Otherwise ``code`` says why not."""

    code: str
    outcome: ActionOutcome | None
    accepted: bool


class ExternalFlow(ApprovalFlow):
    async def dispatch(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        if action.definition.mode is ExecutorMode.DEFERRED:
            return await self._dispatch_deferred(action, run)
        return await super().dispatch(action, run)

    async def _dispatch_deferred(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        context = self.context_for(run)
        guard = await run_guard(action, context)
        if not guard.allowed:
            denial = ExecutionResult.denied(guard.code, guard.message or "Refused by the guard.")
            return await self.finish(run, denial, "guard_denied")
        try:
            receipt = await call_hook(action.definition.executor, context)
        except Exception as exc:
            failure = ExecutionResult.manual_review_failure(
                Code.ACTION_EXECUTION_EXCEPTION, f"dispatch raised {type(exc).__name__}: {exc}"
            )
            return await self.finish(run, failure, "executed")
        if isinstance(receipt, ExecutionResult):
            # The executor answered with a final result at once: no external wait.
            return await self.finish(run, normalize_result(action, receipt), "executed")
        now = self.clock.now()
        timeout = action.definition.timeout
        waiting = run.advance(
            RunStatus.WAITING_EXTERNAL,
            now,
            dispatched_at=run.dispatched_at or now,
            deadline_at=now + timeout if timeout is not None else None,
        )
        data = {"receipt": receipt} if isinstance(receipt, dict) else None
        stored = await self.cas_with_audit(run, waiting, "external_accepted", data=data)
        if stored is None:  # an early callback already completed it
            current = await self.load(run.run_id)
            assert current is not None
            return outcome_of(current)
        return outcome_of(stored)

    # -------------------------------------------------------------- completion
    async def complete(
        self,
        run_id: str,
        attempt_token: str,
        result: ExecutionResult,
        *,
        tenant_id: str | None = None,
    ) -> CompletionResult:
        """Record the external system's final result for the matching attempt.

        ``tenant_id`` comes from an authenticated callback; ``None`` is for trusted in-process
        integrations. A repeated completion answers the stored result; a stale token is refused.
        """
        return await shielded(self._complete(run_id, attempt_token, result, tenant_id), self._tasks)

    async def _complete(
        self, run_id: str, token: str, result: ExecutionResult, tenant_id: str | None
    ) -> CompletionResult:
        if result.status not in (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED):
            return CompletionResult(Code.ACTION_RESULT_NOT_TERMINAL, None, accepted=False)
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self.load(run_id)
            if run is None or (tenant_id is not None and run.tenant_id != tenant_id):
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
            action = self.registry.resolve(run.action_id)
            final = normalize_result(action, result) if action is not None else result
            outcome = await self.terminal_cas(run, final, "external_completed", actor="external")
            if outcome is not None:
                return CompletionResult(outcome.code, outcome, accepted=True)
        raise RuntimeError(f"complete on {run_id}: too much contention")

    # ------------------------------------------------------------ cancellation
    async def cancel_external(self, run: ActionRun, actor: str) -> ActionOutcome | None:
        """Ask the external system to stop (idempotent hook), then record CANCELLED.

        CANCELLED is signoff's terminal decision, not proof the external work stopped; a failing
        or missing hook says so with MANUAL_REVIEW. ``None``: a completion won the race.
        """
        action = self.registry.resolve(run.action_id)
        hook = action.definition.cancel if action is not None else None
        if hook is None:
            result = ExecutionResult.cancelled(
                message="Cancelled; no cancel hook, so the external operation may still complete.",
                retry=RetryDisposition.MANUAL_REVIEW,
            )
        else:
            try:
                answer: Any = await call_hook(hook, self.context_for(run))
                stopped = answer is not False and not (
                    isinstance(answer, ExecutionResult) and answer.status is ExecutionStatus.FAILED
                )
            except Exception:
                stopped = False
            result = (
                ExecutionResult.cancelled(message=f"Cancelled by {actor}.")
                if stopped
                else ExecutionResult.cancelled(
                    Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED,
                    "Cancelled, but the external system did not confirm; review it.",
                    retry=RetryDisposition.MANUAL_REVIEW,
                )
            )
        return await self.terminal_cas(
            run, result, "cancelled", actor=actor, data={"previous": str(run.status)}
        )

    # ----------------------------------------------------------------- orphans
    async def sweep_external(self, limit: int = 1000) -> int:
        """Apply the orphan policy to WAITING_EXTERNAL runs past their deadline."""
        async with self.store.unit() as unit:
            waiting = await unit.runs.list(statuses=[RunStatus.WAITING_EXTERNAL], limit=limit)
        now = self.clock.now()
        handled = 0
        for run in waiting:
            if run.deadline_at is None or run.deadline_at > now:
                continue
            action = self.registry.resolve(run.action_id)
            policy = action.definition.orphan if action is not None else OrphanPolicy.MANUAL_REVIEW
            if policy is OrphanPolicy.CANCEL:
                outcome = await self.cancel_external(run, "signoff")
            else:
                failure = ExecutionResult.manual_review_failure(
                    Code.ACTION_EXTERNAL_TIMEOUT, "The external system never reported completion."
                )
                outcome = await self.terminal_cas(run, failure, "external_timeout", actor="signoff")
            handled += outcome is not None
        return handled
