"""``HookThreads``: the worker threads plain (blocking) executors, guards and hooks run in.

Like the pool ``asyncio.to_thread`` uses (same size, contextvars carried over), except that its
threads are daemons: a hook blocked for good — a client call without a timeout — cannot keep
the process from exiting after a shutdown gave up on it (the default pool is joined at exit, so
one stuck hook held a stopped server forever). A hook cut off that way is like a crash: recovery
decides what its run becomes.
"""

from __future__ import annotations

import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Work = tuple["Future[Any]", Callable[[], Any]]


class HookThreads(Executor):
    def __init__(self, max_workers: int | None = None) -> None:
        self._max = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        context = contextvars.copy_context()
        self._queue.put((future, functools.partial(context.run, fn, *args, **kwargs)))
        if not self._idle.acquire(blocking=False):  # no idle thread: start one, up to the max
            with self._lock:
                if self._threads < self._max:
                    self._threads += 1
                    name = f"signoff-hook-{self._threads}"
                    threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, call = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                del future, call  # drop references before waiting for the next one
            self._idle.release()


HOOK_THREADS = HookThreads()
