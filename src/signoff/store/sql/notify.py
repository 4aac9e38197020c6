"""In-process change notification: wakes ``wait_for_change`` callers when this process commits.

A waiter registers before it reads the current version, so a commit landing between the read and
the wait still wakes it.
"""

from __future__ import annotations

import asyncio
import threading


class Waiter:
    __slots__ = ("future", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = self.loop.create_future()

    async def wait(self, timeout: float) -> bool:
        """``True`` if notified, ``False`` after ``timeout``."""
        try:
            await asyncio.wait_for(self.future, timeout)
        except TimeoutError:
            return False
        return True


class ChangeNotifier:
    """Thread-safe; each waiter is resolved on its own event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}

    def watch(self, run_id: str) -> Waiter:
        waiter = Waiter()
        with self._lock:
            self._waiters.setdefault(run_id, set()).add(waiter)
        return waiter

    def unwatch(self, run_id: str, waiter: Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[run_id]

    def notify(self, run_ids: list[str]) -> None:
        if not self._waiters:  # the common case: nobody is long-polling
            return
        woken: list[Waiter] = []
        with self._lock:
            for run_id in run_ids:
                woken.extend(self._waiters.pop(run_id, ()))
        for waiter in woken:
            waiter.loop.call_soon_threadsafe(_resolve, waiter.future)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiters.values())


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
