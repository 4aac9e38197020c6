"""The server's housekeeping loop: keep this incarnation's heartbeat fresh, expire overdue
approvals, apply orphan policies, recover RUNNING runs whose holder died, and forget completed
duplicate entries past their retention. Every server (stdio and HTTP) runs it.

``maintenance(runtime)`` is an async context manager (a Starlette lifespan fits it via
``maintenance_lifespan``): the loop runs while the server does and stops with it. A failing step
is logged and retried on the next tick; it never stops the loop or the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from signoff.core.runtime import Runtime
from signoff.store.retention import DEFAULT_DUPLICATE_RETENTION, purge_duplicates

DEFAULT_EVERY = 15.0
STOP_GRACE_SECONDS = 5.0
log = logging.getLogger("signoff.maintenance")


@dataclass
class TickReport:
    expired: int = 0
    orphaned: int = 0
    recovered: int = 0
    purged: int = 0
    failures: list[str] = field(default_factory=list)


class Maintenance:
    """One tick does every chore once; ``run`` repeats it every ``every`` seconds until stopped."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        every: float = DEFAULT_EVERY,
        retention: timedelta = DEFAULT_DUPLICATE_RETENTION,
    ) -> None:
        self.runtime = runtime
        self.every = every
        self.retention = retention
        self.ticks = 0
        self.last: TickReport | None = None
        self._ticked = asyncio.Condition()
        self._stop = asyncio.Event()
        self.finished = asyncio.Event()

    async def tick(self) -> TickReport:
        report = TickReport()
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("heartbeat", self.runtime.heartbeat),
            ("expire_overdue", self.runtime.expire_overdue),
            ("sweep_external", self.runtime.sweep_external),
            ("recover_running", self._recover),
            ("purge_duplicates", self._purge),
        ]
        for name, step in steps:
            try:
                count = await step()
            except Exception:
                log.exception("maintenance step %s failed; retrying next tick", name)
                report.failures.append(name)
                continue
            if name == "expire_overdue":
                report.expired = count
            elif name == "sweep_external":
                report.orphaned = count
            elif name == "recover_running":
                report.recovered = count
            elif name == "purge_duplicates":
                report.purged = count
        async with self._ticked:
            self.ticks += 1
            self.last = report
            self._ticked.notify_all()
        return report

    async def _recover(self) -> int:
        report = await self.runtime.recover_running()
        return len(report.redispatched) + len(report.interrupted)

    async def _purge(self) -> int:
        try:
            return await purge_duplicates(
                self.runtime.store, self.runtime.clock.now(), self.retention
            )
        except (NotImplementedError, AttributeError):  # a store without retention support
            return 0

    async def run(self) -> None:
        try:
            while not self._stop.is_set():
                await self.tick()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.every)
        finally:
            self.finished.set()

    def stop(self) -> None:
        self._stop.set()

    async def wait_for_ticks(self, count: int) -> None:
        """Return once ``count`` ticks have completed (tests wait on this under a deadline)."""
        async with self._ticked:
            await self._ticked.wait_for(lambda: self.ticks >= count)


@asynccontextmanager
async def maintenance(
    runtime: Runtime,
    *,
    every: float = DEFAULT_EVERY,
    retention: timedelta = DEFAULT_DUPLICATE_RETENTION,
) -> AsyncIterator[Maintenance]:
    """Run the housekeeping loop in the background for the duration of the block."""
    loop = Maintenance(runtime, every=every, retention=retention)
    task = asyncio.get_running_loop().create_task(loop.run(), name="signoff-maintenance")
    try:
        yield loop
    finally:
        loop.stop()
        # Let a tick in progress finish its writes; cancel only one that hangs.
        _done, pending = await asyncio.wait({task}, timeout=STOP_GRACE_SECONDS)
        for hung in pending:
            hung.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hung


def maintenance_lifespan(
    runtime: Runtime, **options: Any
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A Starlette ``lifespan`` running ``maintenance`` while the app serves."""

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with maintenance(runtime, **options):
            yield

    return lifespan
