"""The server's housekeeping loop: keep this incarnation's heartbeat fresh, expire overdue
approvals, apply orphan policies, recover RUNNING runs whose holder died, forget completed
duplicate entries past their retention, and sign a checkpoint round of the audit chain heads
every ``checkpoint_every`` seconds when an audit key ring is configured (``SIGNOFF_AUDIT_KEYS``;
an instance that finds the round taken by another one signs nothing until its next turn).
Every server (stdio and HTTP) runs it: ``start_application`` starts it, ``Application.close``
stops it.

``maintenance(runtime, store)`` is an async context manager: the loop runs for the duration of
the block. A failing step is logged and retried on the next tick; it never stops the loop or the
server. The chores go through the runtime's governed operations; only the audit checkpoint, which
signs what the store already holds, reads the store itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from signoff.audit.checkpoints import checkpoint_heads
from signoff.audit.keys import KeyRing, keys_from_env
from signoff.core.ports import Store
from signoff.core.runtime import Runtime
from signoff.store.retention import DEFAULT_DUPLICATE_RETENTION

DEFAULT_EVERY = 15.0
DEFAULT_CHECKPOINT_EVERY = 3600.0
STOP_GRACE_SECONDS = 5.0
log = logging.getLogger("signoff.maintenance")


@dataclass
class TickReport:
    expired: int = 0
    orphaned: int = 0
    dispatched: int = 0
    recovered: int = 0
    purged: int = 0
    checkpoints: int = 0
    failures: list[str] = field(default_factory=list)


class Maintenance:
    """One tick does every chore once; ``run`` repeats it every ``every`` seconds until stopped."""

    def __init__(
        self,
        runtime: Runtime,
        store: Store,
        *,
        every: float = DEFAULT_EVERY,
        retention: timedelta = DEFAULT_DUPLICATE_RETENTION,
        audit_keys: KeyRing | str | None = "env",
        checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.every = every
        self.retention = retention
        # "env": the key ring named by SIGNOFF_AUDIT_KEYS, read at each checkpoint (a bad one
        # fails that step, logged; ``signoff serve`` refuses to start on it).
        self.audit_keys = audit_keys
        self.checkpoint_every = timedelta(seconds=checkpoint_every)
        self._last_checkpoint: datetime | None = None
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
            ("dispatch_approved", self.runtime.dispatch_approved),
            ("sweep_external", self.runtime.sweep_external),
            ("recover_running", self._recover),
            ("purge_duplicates", self._purge),
            ("audit_checkpoint", self._checkpoint),
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
            elif name == "dispatch_approved":
                report.dispatched = count
            elif name == "sweep_external":
                report.orphaned = count
            elif name == "recover_running":
                report.recovered = count
            elif name == "purge_duplicates":
                report.purged = count
            elif name == "audit_checkpoint":
                report.checkpoints = count
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
            return await self.runtime.purge_duplicates(self.retention)
        except (NotImplementedError, AttributeError):  # a store without retention support
            return 0

    async def _checkpoint(self) -> int:
        keys = keys_from_env(os.environ) if self.audit_keys == "env" else self.audit_keys
        if not isinstance(keys, KeyRing) or keys.signing_key is None:
            return 0
        now = self.runtime.now()
        if self._last_checkpoint is not None and now - self._last_checkpoint < (
            self.checkpoint_every
        ):
            return 0
        outcome = await checkpoint_heads(self.store, keys, now)
        self._last_checkpoint = now
        if outcome.lost is not None:
            log.info("another instance checkpointed round %d at the same time", outcome.lost)
        return len(outcome.checkpoints)

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
    store: Store,
    *,
    every: float = DEFAULT_EVERY,
    retention: timedelta = DEFAULT_DUPLICATE_RETENTION,
    **options: Any,
) -> AsyncIterator[Maintenance]:
    """Run the housekeeping loop in the background for the duration of the block."""
    loop = Maintenance(runtime, store, every=every, retention=retention, **options)
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
