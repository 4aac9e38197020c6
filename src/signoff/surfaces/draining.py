"""Graceful shutdown state shared by the serving loop and the surfaces.

On SIGTERM the HTTP server stops accepting new connections (its listening sockets close), then
``begin()``: open long-polls (``signoff_get_run`` with ``wait_seconds``) return the run's current
outcome at once, ``/readyz`` answers 503 on connections already open (a load balancer's
keep-alive health check), and the server waits (``settled``) until every call in flight has
answered, for at most the grace period, before it closes the remaining idle streams. What is left
of the grace then bounds the runtime's background work (``Runtime.shutdown``) before the process
exits 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

T = TypeVar("T")

DEFAULT_GRACE = 20.0


class Draining:
    """Create inside the serving loop. Not thread-safe except ``begin_threadsafe``."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._started = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0
        self._deadline: float | None = None

    @property
    def started(self) -> bool:
        return self._started.is_set()

    def remaining(self, grace: float) -> float:
        """Seconds left of the shutdown grace (all of ``grace`` if no shutdown set a deadline)."""
        if self._deadline is None:
            return grace
        return max(self._deadline - self._loop.time(), 0.0)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def begin(self, deadline: float | None = None) -> None:
        """Shutdown begins; ``deadline`` (loop time) is when its grace ends."""
        if deadline is not None and self._deadline is None:
            self._deadline = deadline
        self._started.set()

    def begin_threadsafe(self) -> None:
        """From a signal handler or another thread."""
        self._loop.call_soon_threadsafe(self._started.set)

    @asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        """Count one request as in flight while it runs."""
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def settled(self, timeout: float) -> bool:
        """``True`` once nothing is in flight; ``False`` if calls were still running at ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def unless_draining(self, work: Awaitable[T]) -> tuple[bool, T | None]:
        """Run ``work`` unless shutdown begins first: ``(True, result)``, or ``(False, None)`` with
        ``work`` cancelled. For waits that hold nothing (long-polls)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._started.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            raise
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        if task.cancelled():
            return False, None
        return True, task.result()


class CountRequests:
    """ASGI middleware: every HTTP request except those under ``skip`` (``/mcp``, whose requests
    the MCP middleware counts one by one, leaving out its long-lived streams) is in flight
    until its response ends."""

    def __init__(self, app: ASGIApp, draining: Draining, skip: str) -> None:
        self.app = app
        self.draining = draining
        self.skip = skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.skip):
            await self.app(scope, receive, send)
            return
        async with self.draining.call():
            await self.app(scope, receive, send)
