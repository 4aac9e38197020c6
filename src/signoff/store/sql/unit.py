"""One unit of work: a pooled connection taken on first use, one transaction, one commit.

Nothing is sent to the database before the first statement, and a unit that only read ends with
a rollback, so reads cost no commit and a synchronous governed call commits exactly twice.

On SQLite, a unit takes the store's in-process write lock at its first write and keeps it until
it commits or rolls back. SQLite admits one writer at a time anyway; queueing writers of this
process on an ``asyncio.Lock`` keeps them off SQLite's busy handler, which waits by sleeping in
growing steps (up to 100 ms) and collapses throughput under concurrency. Writers in other
processes still wait through ``busy_timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable

from signoff.store.errors import StoreError
from signoff.store.faults import DecodeFaults
from signoff.store.sql.audit import SqlAuditLog
from signoff.store.sql.duplicates import SqlDuplicateStore
from signoff.store.sql.engine import SQLITE_BUSY_TIMEOUT_MS
from signoff.store.sql.runs import SqlRunStore
from signoff.store.sql.statements import Statements

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
_MYSQL_DUPLICATE_KEY = 1062


class SqlUnit:
    """The ports bound to one transaction (``StoreUnit``)."""

    __slots__ = (
        "_conn",
        "_engine",
        "_write_lock",
        "audit",
        "changed_runs",
        "duplicates",
        "faults",
        "runs",
        "sql",
        "wrote",
    )

    def __init__(
        self,
        engine: AsyncEngine,
        sql: Statements,
        write_lock: asyncio.Lock | None = None,
        faults: DecodeFaults | None = None,
    ) -> None:
        self._engine = engine
        self.faults = faults if faults is not None else DecodeFaults()
        self._write_lock = write_lock
        self._conn: AsyncConnection | None = None
        self.sql = sql
        self.wrote = False
        self.changed_runs: list[str] = []
        self.runs: SqlRunStore = SqlRunStore(self)
        self.duplicates: SqlDuplicateStore = SqlDuplicateStore(self)
        self.audit: SqlAuditLog = SqlAuditLog(self)

    async def read(self, statement: Executable, params: Params | None = None) -> CursorResult[Any]:
        conn = self._conn or await self._connect()
        return await conn.execute(statement, params)

    async def write(self, statement: Executable, params: Params) -> CursorResult[Any]:
        conn = self._conn or await self._connect()
        if not self.wrote:
            if self._write_lock is not None:
                await _acquire(self._write_lock)
            self.wrote = True
        return await conn.execute(statement, params)

    async def insert_or_nothing(self, statement: Executable, params: Mapping[str, Any]) -> bool:
        """Insert one row; ``False`` if its key exists. Never leaves the transaction aborted."""
        if self.sql.conflict_free_inserts:
            result = await self.write(statement, params)
            return result.rowcount == 1
        try:
            await self.write(statement, params)
        except IntegrityError as exc:
            if _mysql_error_code(exc) == _MYSQL_DUPLICATE_KEY:
                return False
            raise
        return True

    async def _connect(self) -> AsyncConnection:
        self._conn = await self._engine.connect()
        return self._conn

    async def finish(self) -> None:
        """Commit what was written (or end a read-only transaction); return the connection."""
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        try:
            await _end(conn, commit=self.wrote)
        finally:
            self._unlock()

    async def abort(self) -> None:
        conn = self._conn
        self._conn = None
        self.changed_runs.clear()
        try:
            if conn is not None:
                await _end(conn, commit=False)
        finally:
            self._unlock()

    def _unlock(self) -> None:
        if self.wrote and self._write_lock is not None and self._write_lock.locked():
            self._write_lock.release()


async def _acquire(lock: asyncio.Lock) -> None:
    """Queue for the write lock as long as SQLite itself would (``busy_timeout``), no longer."""
    try:
        async with asyncio.timeout(SQLITE_BUSY_TIMEOUT_MS / 1000):
            await lock.acquire()
    except TimeoutError:
        raise StoreError(
            "database is locked: another unit of work kept writing for "
            f"{SQLITE_BUSY_TIMEOUT_MS} ms (a nested writing unit in one task never finishes)"
        ) from None


async def _end(conn: AsyncConnection, *, commit: bool) -> None:
    """End the transaction and give the connection back to the pool.

    The engine's pool does not reset connections on return (``pool_reset_on_return=None``: a
    rollback there would cost a round trip or a thread hop per unit), so a connection whose
    transaction could not be ended cleanly is invalidated instead of going back dirty.
    """
    try:
        if commit:
            await conn.commit()
        else:
            await conn.rollback()
    except BaseException:
        await conn.invalidate()
        await conn.close()
        raise
    await conn.close()


def _mysql_error_code(exc: IntegrityError) -> object:
    args = getattr(exc.orig, "args", ())
    return args[0] if args else None
