"""Work that outlives the call that started it, and approval notifications.

``Background`` owns the runtime's task set: governed operations are *shielded* so their durable
steps finish even if the caller goes away, and notifications run fire-and-forget. ``drain`` waits
for all of it (tests, shutdown).

``Notifications`` owns telling the ``Notifier`` port about approval events, after they are
committed: a slow or failing notifier never blocks or loses a run, its failure is only logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from signoff.core.audit_events import Decision
from signoff.core.ledger import RunLedger
from signoff.core.ports import Notifier
from signoff.core.run import ActionRun

T = TypeVar("T")
log = logging.getLogger("signoff")


async def _quietly(call: Coroutine[Any, Any, None]) -> None:
    try:
        await call
    except Exception:
        log.exception("notification failed; the run is unaffected")


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    async def shield(self, awaitable: Awaitable[T]) -> T:
        """Finish ``awaitable`` even if the caller is cancelled (a client that hangs up mid-call)."""
        task = asyncio.ensure_future(awaitable)
        self._keep(task)
        return await asyncio.shield(task)

    def spawn(self, call: Coroutine[Any, Any, None]) -> None:
        """Run ``call`` in the background; its failure is logged, never raised."""
        self._keep(asyncio.get_running_loop().create_task(_quietly(call)))

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def settle(self, timeout: float) -> int:
        """Give everything still running ``timeout`` seconds, then cancel the rest (shutdown);
        returns how many were cut off."""
        if not self._tasks:
            return 0
        _, cut = await asyncio.wait(set(self._tasks), timeout=max(timeout, 0.0))
        for task in cut:
            task.cancel()
        if cut:
            await asyncio.wait(cut)
        return len(cut)

    async def abandon(self) -> None:
        """Cancel everything still running, as a crash would (tests of recovery)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)


class Notifications:
    def __init__(
        self, background: Background, ledger: RunLedger, notifier: Notifier | None = None
    ) -> None:
        self._background = background
        self._ledger = ledger
        self._notifier = notifier

    def requested(self, run: ActionRun) -> None:
        if self._notifier is not None:
            self._background.spawn(self._notifier.approval_requested(run))

    def decided(self, run_id: str, decision: Decision) -> None:
        """Tell the notifier, with the run as committed (it may have executed meanwhile)."""
        notifier = self._notifier
        if notifier is None:
            return

        async def send() -> None:
            run = await self._ledger.load(run_id)
            if run is not None:
                await notifier.approval_decided(run, decision)

        self._background.spawn(send())
