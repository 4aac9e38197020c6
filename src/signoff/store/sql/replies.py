"""Answers from SQLite's writer thread to the event loop that waits for them (``writer.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any


class TurnTimedOut(TimeoutError):
    """The unit waited for its turn on the writer longer than ``busy_timeout``."""


class Reply:
    """One answer the writer thread owes a waiting coroutine; created on that coroutine's loop."""

    __slots__ = ("future", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()

    def send(self, value: Any = None, error: BaseException | None = None) -> None:
        """From the writer thread: the answer, or the error to raise."""
        self._post(_settle, self.future, value, error)

    def cancel(self) -> None:
        self._post(self.future.cancel)

    async def within(self, seconds: float, expired: Callable[[], None]) -> Any:
        """The answer; ``expired`` is called once ``seconds`` have passed without one (it asks
        the writer to refuse the unit if it has not begun, and the writer answers).

        A timer beside the future, cheaper than ``asyncio.timeout`` (which cancels and
        un-cancels the waiting task) on every unit of work."""
        timer = self.loop.call_later(seconds, expired)
        try:
            return await self.future
        finally:
            timer.cancel()

    def _post(self, callback: Any, *args: Any) -> None:
        # RuntimeError: the caller's event loop has closed (its ``asyncio.run`` ended mid-unit).
        # Nobody is left to answer, and the writer must go on serving everyone else.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(callback, *args)


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting (timeout, cancellation)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
