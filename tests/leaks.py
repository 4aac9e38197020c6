"""Which aiosqlite connections are open, and where they were opened.

An aiosqlite connection left open by a test is garbage-collected later, during another test: its
finaliser then warns, or stops its worker thread with a future bound to the first test's closed
event loop ("Event loop is closed"), and ``filterwarnings = error`` fails whichever test happens
to be running. ``tests/conftest.py`` fails the test that leaked instead, at its end, naming where
the connection was opened, so a leak is found where it is made rather than flaking elsewhere.
"""

from __future__ import annotations

import asyncio
import io
import threading
import traceback
import weakref
from typing import Any

import aiosqlite.core

_opened: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_original_init = aiosqlite.core.Connection.__init__


def _where() -> str:
    """The awaiting task's coroutine chain (it reaches the test through SQLAlchemy's greenlets,
    which a plain stack does not), else the thread's stack."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is not None:
        buffer = io.StringIO()
        task.print_stack(limit=20, file=buffer)
        return buffer.getvalue()
    return "".join(traceback.format_stack(limit=20)[:-2])


def _tracked_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    where = _where()
    with _lock:
        _opened[self] = where


aiosqlite.core.Connection.__init__ = _tracked_init  # type: ignore[method-assign]


def _is_open(connection: Any) -> bool:
    return getattr(connection, "_connection", None) is not None


def open_connections() -> set[int]:
    """Ids of the connections open now."""
    with _lock:
        return {id(c) for c in _opened if _is_open(c)}


def leaked_since(before: set[int]) -> list[str]:
    """Where each connection opened since ``before`` and still open was opened."""
    with _lock:
        return [where for c, where in _opened.items() if id(c) not in before and _is_open(c)]
