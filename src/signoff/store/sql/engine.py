"""Async engines per dialect, set up for signoff's access pattern.

- SQLite (``sqlite+aiosqlite``): WAL journal, ``busy_timeout`` and ``synchronous=FULL`` on every
  connection. Switching a file into WAL takes an exclusive lock WITHOUT SQLite's busy handler
  (``busy_timeout`` does not cover it), so several connections opening a fresh file at once would
  get "database is locked"; each connection retries the switch until the same timeout instead. Readers never block the writer and vice versa, but SQLite allows ONE writer at a
  time per database file: concurrent units of work queue on the write lock (up to the busy
  timeout) instead of running in parallel. Every unit of work starts with its write when it
  writes at all, so a queued writer waits and then proceeds rather than failing. Good for one
  server process or a few on one machine; use PostgreSQL for real concurrency.
- PostgreSQL (``postgresql+asyncpg``): READ COMMITTED (the default); asyncpg prepares and
  caches each statement per connection.
- MySQL/MariaDB (``mysql+aiomysql``): READ COMMITTED, so a reserve that lost the insert race
  reads the winner's committed row, and InnoDB takes no gap locks; ``utf8mb4``.

URLs without an async driver get the default one (``postgresql://`` becomes
``postgresql+asyncpg://``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff.extras import require
from signoff.store.errors import UnsupportedDatabase

SQLITE_BUSY_TIMEOUT_MS = 10_000
_SQLITE_BUSY = 5  # primary result code; extended codes keep it in the low byte
_ASYNC_DRIVERS = {
    "sqlite": ("aiosqlite",),
    "postgresql": ("asyncpg",),
    "mysql": ("aiomysql", "asyncmy"),
    "mariadb": ("aiomysql", "asyncmy"),
}
# The package extra that brings each driver (the base install has SQLite's).
_EXTRA = {"asyncpg": "postgres", "aiomysql": "mysql"}
_DEFAULT_DRIVER = {
    "sqlite": "aiosqlite",
    "postgresql": "asyncpg",
    "mysql": "aiomysql",
    "mariadb": "aiomysql",
}


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and put in the default async driver when none is named."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise UnsupportedDatabase(f"not a database URL: {url!r}") from exc
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        raise UnsupportedDatabase(
            f"unsupported database {backend!r}: use sqlite+aiosqlite, postgresql+asyncpg "
            "or mysql+aiomysql"
        )
    if "+" not in parsed.drivername:
        parsed = parsed.set(drivername=f"{backend}+{_DEFAULT_DRIVER[backend]}")
    driver = parsed.get_driver_name()
    if driver not in _ASYNC_DRIVERS[backend]:
        raise UnsupportedDatabase(
            f"{backend}+{driver} is not an async driver; use {backend}+{_DEFAULT_DRIVER[backend]}"
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise UnsupportedDatabase(
            "an in-memory SQLite database cannot be shared between connections; "
            "use a file (sqlite+aiosqlite:///signoff.db) or memory://"
        )
    return parsed


def create_engine(url: str | URL, *, pool_size: int = 10, max_overflow: int = 30) -> AsyncEngine:
    """An engine for ``url``. The pool bounds how many units of work run at once."""
    parsed = normalize_url(url)
    backend = parsed.get_backend_name()
    extra = _EXTRA.get(parsed.get_driver_name())
    if extra is not None:
        require(extra, f"a {backend} database (--database / SIGNOFF_DATABASE_URL)")
    options: dict[str, Any] = {
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        # Every unit of work ends its own transaction (and invalidates a connection it could
        # not end), so the pool's rollback-on-return would only add a round trip per unit.
        "pool_reset_on_return": None,
    }
    if backend == "sqlite":
        engine = create_async_engine(parsed, **options)
        event.listen(engine.sync_engine, "connect", _configure_sqlite)
        return engine
    # Servers close idle connections (MySQL's wait_timeout); recycle well before that.
    options["pool_recycle"] = 1800
    if backend in ("mysql", "mariadb"):
        options["isolation_level"] = "READ COMMITTED"
        if "charset" not in parsed.query:
            options["connect_args"] = {"charset": "utf8mb4"}
    return create_async_engine(parsed, **options)


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()
    # On the driver's own connection, so waiting for the lock never blocks the event loop.
    dbapi_connection.run_async(_enter_wal)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


async def _enter_wal(connection: Any) -> None:
    """``PRAGMA journal_mode = WAL``, waiting up to the busy timeout for the exclusive lock it needs.

    The switch reads the file header in a read transaction, then upgrades it to a write
    transaction to rewrite the header; SQLite never calls the busy handler for such an upgrade
    (it could deadlock), so while another connection holds the write lock of a file still in
    rollback mode (typically: another first start switching it right now) the pragma fails at
    once with "database is locked". WAL is a property of the file: once any connection
    switched it, the pragma needs no write lock and succeeds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            cursor = await connection.execute("PRAGMA journal_mode = WAL")
            await cursor.close()
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_BUSY
            if not busy or loop.time() + pause > deadline:
                raise
        await _wait_for_wal_lock(pause)
        pause = min(pause * 2, 0.05)


async def _wait_for_wal_lock(pause: float) -> None:
    """The pause between two attempts to switch into WAL."""
    await asyncio.sleep(pause)
