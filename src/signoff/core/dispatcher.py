"""``Dispatcher``: the one place a governed run meets its executor.

Owns: starting an attempt (RUNNING with a fresh attempt token, held by this incarnation), the
bounded background lane, and running a run committed RUNNING — the guard exactly once,
immediately before the side effect, then by the action's mode:

- sync: the executor now, and its result recorded;
- async: queued on the lane; the claim is a compare-and-set, so queued work may be cancelled
  until it is claimed, never both;
- deferred: handed to the external system, then WAITING_EXTERNAL until its completion arrives
  (``external.py``). The operation id (``run_id:attempt_token``) is deterministic, so a
  re-dispatch is idempotent at the receiver; dispatch is at-least-once capable, never
  exactly-once.

Durable writes go through the ``RunLedger``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from signoff.core.answers import outcome_of
from signoff.core.audit_events import AuditKind
from signoff.core.clock import new_token
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.definition import ExecutorMode
from signoff.core.disclosure import raised, told
from signoff.core.dispatch import (
    AsyncLane,
    call_hook,
    context_for,
    normalize_result,
    run_guard,
)
from signoff.core.ledger import RunLedger
from signoff.core.observe import NO_OBSERVER, RuntimeObserver
from signoff.core.ports import Clock
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome, ExecutionContext, ExecutionResult
from signoff.core.retry import Retrier, Sleeper
from signoff.core.run import ActionRun, ApprovalState, DuplicateScope, RunChanges, RunStatus


class Dispatcher:
    def __init__(
        self,
        ledger: RunLedger,
        clock: Clock,
        worker_id: str,
        lane: AsyncLane | None = None,
        sleep: Sleeper = asyncio.sleep,
        observer: RuntimeObserver = NO_OBSERVER,
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self.worker_id = worker_id
        self._lane = lane
        self._retrier = Retrier(sleep)
        self._observer = observer

    @property
    def _background(self) -> AsyncLane:
        if self._lane is None:
            self._lane = AsyncLane()
        return self._lane

    # ----------------------------------------------------------------- attempts
    def start_attempt(
        self,
        run: ActionRun,
        now: datetime,
        *,
        approval: ApprovalState | None = None,
        duplicate_scope: DuplicateScope | None = None,
    ) -> ActionRun:
        """``run`` moved to RUNNING with a new attempt held by this incarnation (not committed)."""
        # A repair re-dispatches the original's operation: it keeps the original's token.
        keep = run.repair_of is not None and run.attempt_token is not None
        changes: RunChanges = {
            "attempt": run.attempt + 1,
            "attempt_token": run.attempt_token if keep and run.attempt_token else new_token(),
            "worker_id": self.worker_id,
        }
        if approval is not None:
            changes["approval"] = approval
        if duplicate_scope is not None:
            changes["duplicate_scope"] = duplicate_scope
        return run.advance(RunStatus.RUNNING, now, **changes)

    def claim(self, run: ActionRun, now: datetime) -> ActionRun:
        """``run`` marked dispatched and held by this incarnation (not committed)."""
        return run.advance(RunStatus.RUNNING, now, dispatched_at=now, worker_id=self.worker_id)

    # --------------------------------------------------------------------- lane
    def admit_background(self, tenant_id: str) -> bool:
        """Take a lane slot for background work about to be committed; ``False``: the lane, or
        the tenant's share of it, is full."""
        return self._background.try_acquire(tenant_id)

    def release_background(self, tenant_id: str) -> None:
        """Give back a slot taken with ``admit_background`` whose work was never submitted."""
        self._background.release_slot(tenant_id)

    def force_background(self, tenant_id: str) -> None:
        """Approved work is never refused for a full lane: it queues behind the running limit."""
        self._background.force_acquire(tenant_id)

    async def drain(self) -> None:
        if self._lane is not None:
            await self._lane.drain()

    async def stop_background(self, timeout: float) -> tuple[int, int]:
        """Shutdown: queued work never starts here; running work gets ``timeout`` seconds
        (``AsyncLane.stop``)."""
        return await self._lane.stop(timeout) if self._lane is not None else (0, 0)

    def lane_usage(self) -> tuple[int, int]:
        """(slots taken, capacity) of the background lane (for metrics)."""
        return self._background.occupied, self._background.capacity

    # ----------------------------------------------------------------- dispatch
    async def dispatch(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        """``run`` is committed RUNNING (async work holds a lane slot). Sync and deferred work
        runs now; async work is queued and answers ACCEPTED."""
        if action.definition.mode is ExecutorMode.ASYNC:
            self._background.submit(lambda: self._claim_then_execute(action, run), run.tenant_id)
            return outcome_of(run)
        return await self.execute(action, run)

    async def _claim_then_execute(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        stored = await self._ledger.cas(
            run, self.claim(run, self._clock.now()), AuditKind.DISPATCH_CLAIMED
        )
        if stored is None:  # cancelled (or recovered) before it was claimed
            return await self._ledger.truth(run.run_id)
        return await self.execute(action, stored)

    async def execute(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        """The guard, then the side effect, for a run this incarnation holds (also recovery's
        re-dispatch of a claimed run)."""
        context = context_for(run)
        observe = self._observer.stage
        with observe("guard", run.run_id, action.id) as guarding:
            guard = await run_guard(action, context)
            guarding.set(allowed=guard.allowed)
        if not guard.allowed:
            result = ExecutionResult.denied(
                guard.code, guard.message or told(guard.code, action, ExecutionStatus.DENIED)
            ).model_copy(update={"detail": guard.detail})
            with observe("record", run.run_id, action.id) as recording:
                recording.set(code=result.code)
                return await self._ledger.finish(run, result, AuditKind.GUARD_DENIED)
        if action.definition.mode is ExecutorMode.DEFERRED:
            return await self._hand_off(action, run)
        return await self._run_executor(action, run, context)

    async def _run_executor(
        self, action: CompiledAction, run: ActionRun, context: ExecutionContext
    ) -> ActionOutcome:
        """The executor, retried inside the run with the same operation id where that is safe
        (``retry.py``); every retried attempt is audited before its wait."""

        async def audit_retry(attempt: int, result: ExecutionResult, wait: float) -> None:
            data: dict[str, object] = {
                "attempt": attempt,
                "operation_id": context.operation_id,
                "possibly_applied": result.possibly_applied,
                "retry_in_seconds": round(wait, 3),
            }
            if result.detail:  # already redacted, like a final result's
                data["detail"] = result.detail
            await self._ledger.note(run, AuditKind.ATTEMPT_FAILED, code=result.code, data=data)

        observe = self._observer.stage
        with observe("execute", run.run_id, action.id) as executing:
            result, attempts = await self._retrier.execute(action, context, audit_retry)
            executing.set(code=result.code, attempt=run.attempt, retries=attempts - 1)
        data = {"attempts": attempts} if attempts > 1 else None
        with observe("record", run.run_id, action.id) as recording:
            recording.set(code=result.code)
            return await self._ledger.finish(run, result, AuditKind.EXECUTED, data=data)

    async def _hand_off(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        try:
            receipt = await call_hook(action.definition.executor, context_for(run))
        except Exception as exc:
            failure = ExecutionResult.manual_review_failure(
                Code.ACTION_EXECUTION_EXCEPTION, told(Code.ACTION_EXECUTION_EXCEPTION)
            ).model_copy(update={"detail": raised("dispatch", exc)})
            return await self._ledger.finish(run, failure, AuditKind.EXECUTED)
        if isinstance(receipt, ExecutionResult):
            # The executor answered with a final result at once: no external wait.
            return await self._ledger.finish(
                run, normalize_result(action, receipt), AuditKind.EXECUTED
            )
        now = self._clock.now()
        timeout = action.definition.timeout
        waiting = run.advance(
            RunStatus.WAITING_EXTERNAL,
            now,
            dispatched_at=run.dispatched_at or now,
            deadline_at=now + timeout if timeout is not None else None,
        )
        data = {"receipt": receipt} if isinstance(receipt, dict) else None
        stored = await self._ledger.cas(run, waiting, AuditKind.EXTERNAL_ACCEPTED, data=data)
        if stored is None:  # an early callback already completed it
            return await self._ledger.truth(run.run_id)
        return outcome_of(stored)
