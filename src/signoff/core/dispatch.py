"""Calling executors and guards, normalising what they return, and the bounded async lane.

The mechanics only; *when* a guard and an executor run is the ``Dispatcher``'s decision.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from signoff.core import substance
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.declared import checked_decision, checked_result
from signoff.core.definition import Hook
from signoff.core.disclosure import raised, screened, screened_decision, told
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionContext, ExecutionResult, GuardDecision
from signoff.core.run import ActionRun
from signoff.core.threads import HOOK_THREADS

log = logging.getLogger("signoff")


def context_for(run: ActionRun) -> ExecutionContext:
    """What executors, guards and cancel hooks receive for the run's current attempt."""
    assert run.attempt_token is not None and run.operation_id is not None
    return ExecutionContext(
        run_id=run.run_id,
        action_id=run.action_id,
        tenant_id=run.tenant_id,
        principal=run.principal,
        input=substance.will_run(run),
        resource=run.resource,
        attempt_token=run.attempt_token,
        operation_id=run.operation_id,
        preview=run.preview.output if run.preview is not None else None,
        preview_digest=run.preview.digest if run.preview is not None else None,
    )


def _is_async(hook: Hook) -> bool:
    call = getattr(hook, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(call)


async def call_hook(hook: Hook, context: ExecutionContext) -> Any:
    """Await async hooks on the loop; run plain callables in a worker thread (``threads.py``) so
    they never block it."""
    if _is_async(hook):
        return await hook(context)
    value = await asyncio.get_running_loop().run_in_executor(HOOK_THREADS, hook, context)
    if inspect.isawaitable(value):
        value = await value
    return value


async def run_guard(action: CompiledAction, context: ExecutionContext) -> GuardDecision:
    """The guard fails closed: an exception or an unexpected value denies."""
    guard = action.definition.guard
    if guard is None:
        return GuardDecision.allow()
    try:
        decision = await call_hook(guard, context)
    except Exception as exc:
        detail = raised("guard", exc)
        log.warning("run %s: the pre-execution guard failed: %s", context.run_id, detail)
        return GuardDecision.deny(
            Code.PRE_EXECUTION_DENIED, told(Code.PRE_EXECUTION_DENIED)
        ).model_copy(update={"detail": detail})
    if isinstance(decision, GuardDecision):
        return screened_decision(action, checked_decision(action, decision))
    if decision is True:
        return GuardDecision.allow()
    return GuardDecision.deny(
        Code.PRE_EXECUTION_DENIED, told(Code.PRE_EXECUTION_DENIED)
    ).model_copy(
        update={"detail": f"guard returned {type(decision).__name__}, not a GuardDecision"}
    )


def normalize_result(action: CompiledAction, value: Any) -> ExecutionResult:
    """Turn what an executor (or a completion, or a preview) answered into a result: domain codes
    take the manifest's mapping, the code and output are checked against what the action
    declares, and the message is screened (``disclosure``) before anyone can store or read it."""
    return screened(action, _normalized(action, value))


def _normalized(action: CompiledAction, value: Any) -> ExecutionResult:
    if value is None:
        return ExecutionResult.succeeded({})
    if isinstance(value, ExecutionResult):
        result = value
    elif isinstance(value, dict):
        result = ExecutionResult.succeeded(value)
    else:
        return ExecutionResult.manual_review_failure(
            Code.ACTION_FAILED, told(Code.ACTION_FAILED)
        ).model_copy(
            update={
                "detail": f"executor returned {type(value).__name__}, "
                "expected a JSON object or ExecutionResult"
            }
        )
    if result.status not in (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED):
        return ExecutionResult.manual_review_failure(
            Code.ACTION_FAILED, f"executor returned non-final status {result.status}"
        )
    mapping = action.definition.results.get(result.code)
    if mapping is not None:
        result = result.model_copy(
            update={
                "status": mapping.status,
                "retry": mapping.retry,
                "message": result.message or mapping.message,
            }
        )
    if result.output is not None:
        try:
            json.dumps(result.output)
        except (TypeError, ValueError):
            return ExecutionResult.manual_review_failure(
                Code.ACTION_FAILED, "executor output is not JSON-serialisable"
            )
    return checked_result(action, result)


async def run_executor(action: CompiledAction, context: ExecutionContext) -> ExecutionResult:
    """Dispatch once. An exception means the side effect may have happened: manual review."""
    timeout = action.definition.timeout
    try:
        call = call_hook(action.definition.executor, context)
        value = await (
            asyncio.wait_for(call, timeout.total_seconds()) if timeout is not None else call
        )
    except TimeoutError:  # it may still finish, or already have had its effect
        return ExecutionResult.possibly_applied_failure(
            Code.ACTION_TIMED_OUT, f"executor did not finish within {timeout}"
        )
    except Exception as exc:
        return ExecutionResult.manual_review_failure(
            Code.ACTION_EXECUTION_EXCEPTION, told(Code.ACTION_EXECUTION_EXCEPTION)
        ).model_copy(update={"detail": raised("executor", exc)})
    return normalize_result(action, value)


DEFAULT_TENANT_SHARE = 0.5
"""The part of the background lane (slots and running places) one tenant may hold."""


class AsyncLane:
    """In-process background work with bounded concurrency and a bounded backlog, shared fairly.

    ``try_acquire`` takes a slot before anything is committed so a full lane refuses cleanly;
    ``submit`` runs the work under the concurrency limit and frees the slot when it ends. One
    tenant holds at most ``tenant_share`` of the slots and of the running places, so a tenant that
    floods the lane with slow work leaves room for every other tenant's work to be admitted and
    to start.
    """

    def __init__(
        self,
        max_concurrency: int = 16,
        max_pending: int = 1024,
        tenant_share: float = DEFAULT_TENANT_SHARE,
    ) -> None:
        if not 0 < tenant_share <= 1:
            raise ValueError("the lane's tenant share must be in (0, 1]")
        self._capacity = max_concurrency + max_pending
        self._tenant_capacity = max(1, int(self._capacity * tenant_share))
        self._tenant_running = max(1, int(max_concurrency * tenant_share))
        self._slots = 0
        self._by_tenant: dict[str, int] = {}
        self._running = asyncio.Semaphore(max_concurrency)
        self._tenant_sems: dict[str, asyncio.Semaphore] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def occupied(self) -> int:
        """Slots taken: background work running or queued (for metrics)."""
        return self._slots

    @property
    def capacity(self) -> int:
        return self._capacity

    def try_acquire(self, tenant_id: str = "") -> bool:
        """A slot for ``tenant_id``'s work, or ``False`` when the lane or its share is full."""
        if self._slots >= self._capacity:
            return False
        if self._by_tenant.get(tenant_id, 0) >= self._tenant_capacity:
            return False
        self._take(tenant_id)
        return True

    def force_acquire(self, tenant_id: str = "") -> None:
        """Take a slot past the limits (approved work must not be refused)."""
        self._take(tenant_id)

    def _take(self, tenant_id: str) -> None:
        self._slots += 1
        self._by_tenant[tenant_id] = self._by_tenant.get(tenant_id, 0) + 1
        self._idle.clear()

    def release_slot(self, tenant_id: str = "") -> None:
        self._slots -= 1
        left = self._by_tenant.get(tenant_id, 0) - 1
        if left > 0:
            self._by_tenant[tenant_id] = left
        else:
            # No slot, so no holder of its semaphore: forget the tenant (bounded memory).
            self._by_tenant.pop(tenant_id, None)
            self._tenant_sems.pop(tenant_id, None)
        if self._slots == 0:
            self._idle.set()

    def held_by(self, tenant_id: str) -> int:
        return self._by_tenant.get(tenant_id, 0)

    def submit(
        self, work: Callable[[], Coroutine[Any, Any, Any]], tenant_id: str = ""
    ) -> asyncio.Task[Any]:
        """Run ``work`` in a slot already taken for ``tenant_id`` (after ``close``: never — the
        work stays queued in the store, for the next process's recovery)."""
        share = self._tenant_sems.setdefault(tenant_id, asyncio.Semaphore(self._tenant_running))

        async def runner() -> Any:
            try:
                async with share, self._running:
                    if self._closed:
                        return None
                    started = asyncio.current_task()
                    assert started is not None
                    self._started.add(started)
                    try:
                        return await work()
                    finally:
                        self._started.discard(started)
            finally:
                self.release_slot(tenant_id)

        task = asyncio.get_running_loop().create_task(runner())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self._closed:
            task.cancel()
        return task

    async def drain(self) -> None:
        """Wait until every submitted piece of work has finished."""
        await self._idle.wait()

    def close(self) -> int:
        """Start nothing more: work still waiting for a running place is dropped (its run was
        committed before it was queued, so it stays in the store for recovery). Returns how
        many were dropped."""
        self._closed = True
        waiting = [task for task in self._tasks if task not in self._started]
        for task in waiting:
            task.cancel()
        return len(waiting)

    async def stop(self, timeout: float) -> tuple[int, int]:
        """``close``, then give the work already running ``timeout`` seconds to finish, then
        cancel what is left, as a crash would. Returns (dropped before starting, cut off)."""
        dropped = self.close()
        running = set(self._tasks)
        cut: set[asyncio.Task[Any]] = set()
        if running:
            _, cut = await asyncio.wait(running, timeout=max(timeout, 0.0))
            for task in cut:
                task.cancel()
            if cut:
                await asyncio.wait(cut)
        return dropped, len(cut)
