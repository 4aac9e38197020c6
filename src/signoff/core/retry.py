"""In-run retries (``executor.retry``): the same operation id, backoff with jitter, every attempt
audited. What the caller finally sees (contract §4):

=========================================  ==========  =============  =========================
the executor's result                      idempotent  attempts left  then
=========================================  ==========  =============  =========================
possibly applied (timeout or dropped       yes         yes            called again, same
connection after sending, 5xx,                                        ``operation_id``
``ACTION_TIMED_OUT``)
possibly applied                           yes         none           ``MANUAL_REVIEW``
possibly applied                           no          any            ``MANUAL_REVIEW`` at once
nothing happened (``retryable_failure``:   any         yes            called again, same
refused connection, nothing sent)                                     ``operation_id``
nothing happened                           any         none           ``AFTER_BACKOFF``
anything else (success, 4xx, ...)          any         any            recorded as it is
=========================================  ==========  =============  =========================

So ``AFTER_BACKOFF`` reaches a caller only when no side effect can have happened. The wait before
attempt ``n + 1`` is ``backoff * 2**(n - 1)`` scaled by a random factor in [0.5, 1) ("equal
jitter": never zero, never in lockstep with other runs). The clock, the sleeper and the random
source are injected, so tests never sleep.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from signoff.core.codes import ExecutionStatus, RetryDisposition
from signoff.core.dispatch import run_executor
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionContext, ExecutionResult

Sleeper = Callable[[float], Awaitable[None]]
OnRetry = Callable[[int, ExecutionResult, float], Awaitable[None]]
"""Told ``(attempt that failed, its result, seconds until the next)`` before each wait."""


def retry_in_run(result: ExecutionResult, idempotent: bool) -> bool:
    """Whether calling again with the same operation id is safe for this result."""
    if result.status is not ExecutionStatus.FAILED:
        return False
    if result.possibly_applied:
        return idempotent
    return result.retry is RetryDisposition.AFTER_BACKOFF


def backoff_delay(backoff: float, failed: int, fraction: float) -> float:
    """Seconds to wait after the ``failed``-th failed attempt; ``fraction`` in [0, 1)."""
    return float(backoff * 2.0 ** (failed - 1) * (0.5 + fraction / 2))


@dataclass(frozen=True, slots=True)
class Retrier:
    sleep: Sleeper
    fraction: Callable[[], float] = random.random

    async def execute(
        self, action: CompiledAction, context: ExecutionContext, on_retry: OnRetry
    ) -> tuple[ExecutionResult, int]:
        """Dispatch until a result is final for the caller; the result and the attempts made."""
        spec = action.definition.retry
        attempts = spec.attempts if spec is not None else 1
        idempotent = action.definition.executor_idempotent
        attempt = 1
        while True:
            result = await run_executor(action, context)
            if attempt >= attempts or not retry_in_run(result, idempotent):
                return result, attempt
            assert spec is not None
            wait = backoff_delay(spec.backoff.total_seconds(), attempt, self.fraction())
            await on_retry(attempt, result, wait)
            await self.sleep(wait)
            attempt += 1
