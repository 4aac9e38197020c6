"""``LimitLedger`` in memory: a subject's lock is an ``asyncio.Lock`` held until the unit ends.

Atomic among the units of one event loop (which is what the in-memory store is for); rows live
in a dict guarded by a ``threading.Lock`` like the rest of the in-memory store.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

from signoff.core.limits import LimitEntry


class InMemoryLimitRows:
    """The reservations and the per-subject locks, shared by every unit of one store."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.rows: dict[tuple[str, str], tuple[str, LimitEntry]] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    def lock_for(self, key: str) -> asyncio.Lock:
        with self.guard:
            return self.locks.setdefault(key, asyncio.Lock())


class InMemoryLimitLedger:
    """One unit's view: remembers the subject locks it took, released by ``finish``."""

    def __init__(self, rows: InMemoryLimitRows) -> None:
        self._rows = rows
        self._held: list[asyncio.Lock] = []
        self._keys: set[str] = set()

    async def lock_totals(self, key: str, since: datetime, exclude_run: str) -> tuple[int, float]:
        if key not in self._keys:
            lock = self._rows.lock_for(key)
            await lock.acquire()
            self._held.append(lock)
            self._keys.add(key)
        entries = [e for e in await self.usage(key, since) if e.run_id != exclude_run]
        return len(entries), sum(e.amount for e in entries)

    async def usage(self, key: str, since: datetime) -> list[LimitEntry]:
        with self._rows.guard:
            return [
                entry
                for (k, _run), (_tenant, entry) in self._rows.rows.items()
                if k == key and entry.reserved_at > since
            ]

    async def hold(
        self, key: str, tenant_id: str, run_id: str, amount: float, now: datetime
    ) -> None:
        with self._rows.guard:
            self._rows.rows[(key, run_id)] = (tenant_id, LimitEntry(run_id, now, amount))

    async def release(self, run_id: str) -> int:
        with self._rows.guard:
            doomed = [k for k in self._rows.rows if k[1] == run_id]
            for k in doomed:
                del self._rows.rows[k]
        return len(doomed)

    async def purge(self, older_than: datetime) -> int:
        with self._rows.guard:
            doomed = [k for k, (_t, e) in self._rows.rows.items() if e.reserved_at < older_than]
            for k in doomed:
                del self._rows.rows[k]
        return len(doomed)

    def finish(self) -> None:
        for lock in reversed(self._held):
            lock.release()
        self._held.clear()
        self._keys.clear()
