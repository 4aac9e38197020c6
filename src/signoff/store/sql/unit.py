"""One unit of work: a pooled connection taken on first use, one transaction, one commit.

Nothing is sent to the database before the first statement, and a unit that only read ends with
a rollback, so reads cost no commit and a synchronous governed call commits exactly twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable

from signoff.store.sql.statements import Statements

if TYPE_CHECKING:
    from signoff.store.sql.audit import SqlAuditLog
    from signoff.store.sql.duplicates import SqlDuplicateStore
    from signoff.store.sql.runs import SqlRunStore

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
_MYSQL_DUPLICATE_KEY = 1062


class SqlUnit:
    """The ports bound to one transaction (``StoreUnit``)."""

    __slots__ = ("_conn", "_engine", "audit", "changed_runs", "duplicates", "runs", "sql", "wrote")

    def __init__(self, engine: AsyncEngine, sql: Statements) -> None:
        from signoff.store.sql.audit import SqlAuditLog
        from signoff.store.sql.duplicates import SqlDuplicateStore
        from signoff.store.sql.runs import SqlRunStore

        self._engine = engine
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
        """Commit what was written (or just end a read-only transaction) and return the connection."""
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        try:
            if self.wrote:
                await conn.commit()
            else:
                await conn.rollback()
        finally:
            await conn.close()

    async def abort(self) -> None:
        conn = self._conn
        if conn is None:
            return
        self._conn = None
        self.changed_runs.clear()
        try:
            await conn.rollback()
        finally:
            await conn.close()


def _mysql_error_code(exc: IntegrityError) -> object:
    args = getattr(exc.orig, "args", ())
    return args[0] if args else None
