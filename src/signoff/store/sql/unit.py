"""One unit of work: one transaction, its writes committed together.

PostgreSQL and MySQL: a pooled connection is taken on first use; nothing is sent before the
first statement, and a unit that only read ends with a rollback, so reads cost no commit and a
synchronous governed call commits exactly twice.

SQLite: reads run on a pooled reader connection (WAL readers never wait for the writer) until
the unit's first write; from then on everything runs on the store's one writer (``writer.py``),
so the unit reads its own writes. Writes that need no answer (audit rows, a new run) are held
back and sent with the unit's next statement or its end, so a unit costs one thread hop per
statement whose answer it waits for, plus one for its end, which is answered after the group
commit's fsync. A whole unit handed over at once (``SqlStore.run_unit``) runs *on* the writer:
the unit is bound to the writer's connection and every statement executes at once, so the unit
costs one hop in all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable

from signoff.core.ports import ChainHead
from signoff.store.errors import StoreError
from signoff.store.faults import DecodeFaults
from signoff.store.sql.audit import SqlAuditLog
from signoff.store.sql.direct import DirectConnection, Executes
from signoff.store.sql.duplicates import SqlDuplicateStore
from signoff.store.sql.engine import SQLITE_BUSY_TIMEOUT_MS
from signoff.store.sql.limits import SqlLimitLedger
from signoff.store.sql.runs import SqlRunStore
from signoff.store.sql.statements import Statements
from signoff.store.sql.writer import SqliteWriter, Ticket

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]
Extract = Callable[[CursorResult[Any]], Any]
Check = Callable[[CursorResult[Any]], None]
_MYSQL_DUPLICATE_KEY = 1062


def rowcount(result: CursorResult[Any]) -> int:
    return result.rowcount


class SqlUnit:
    """The ports bound to one transaction (``StoreUnit``)."""

    __slots__ = (
        "_conn",
        "_deferred",
        "_direct",
        "_engine",
        "_ticket",
        "_writer",
        "audit",
        "changed_runs",
        "duplicates",
        "faults",
        "limits",
        "runs",
        "sql",
        "wrote",
    )

    def __init__(
        self,
        engine: AsyncEngine,
        sql: Statements,
        writer: SqliteWriter | None = None,
        faults: DecodeFaults | None = None,
    ) -> None:
        self._engine = engine
        self.faults = faults if faults is not None else DecodeFaults()
        self._writer = writer
        self._conn: AsyncConnection | None = None
        self._ticket: Ticket | None = None  # SQLite: set once the writer has seen this unit
        self._deferred: list[Callable[[Connection], Any]] = []
        self._direct: DirectConnection | None = None  # SQLite, a whole unit, on the writer
        self.sql = sql
        self.wrote = False
        self.changed_runs: list[str] = []
        self.runs: SqlRunStore = SqlRunStore(self)
        self.duplicates: SqlDuplicateStore = SqlDuplicateStore(self)
        self.audit: SqlAuditLog = SqlAuditLog(self)
        self.limits: SqlLimitLedger = SqlLimitLedger(self)

    def bind(self, conn: DirectConnection | None) -> None:
        """Run on the writer thread with its connection: every statement executes at once."""
        self._direct = conn

    async def read(self, statement: Executable, params: Params | None, extract: Extract) -> Any:
        if self._direct is not None:
            return extract(self._direct.execute(statement, params))
        if self.wrote and self._writer is not None:
            return await self._on_writer(lambda conn: extract(conn.execute(statement, params)))
        conn = self._conn or await self._connect()
        return extract(await conn.execute(statement, params))

    async def write(
        self, statement: Executable, params: Params, extract: Extract = rowcount
    ) -> Any:
        """A write whose answer (by default its row count) the caller needs now."""
        self.wrote = True
        if self._direct is not None:
            return extract(self._direct.execute(statement, params))
        if self._writer is not None:
            return await self._on_writer(lambda conn: extract(conn.execute(statement, params)))
        conn = self._conn or await self._connect()
        return extract(await conn.execute(statement, params))

    async def write_unanswered(
        self, statement: Executable, params: Params, check: Check | None = None
    ) -> None:
        """A write nobody waits on; ``check`` may raise to fail the unit.

        On SQLite it is sent with the unit's next statement or its end, so ``check`` may raise
        only then (from the unit's exit); the whole unit is rolled back either way.
        """
        if self._writer is None or self._direct is not None:
            result = await self.write(statement, params, _itself)
            if check is not None:
                check(result)
            return
        self.wrote = True

        def op(conn: Connection) -> None:
            result = conn.execute(statement, params)
            if check is not None:
                check(result)

        self._deferred.append(op)

    def chained(self, head: ChainHead) -> None:
        """This unit set a tenant's chain head (PostgreSQL: remembered once it commits)."""

    @property
    def on_writer(self) -> bool:
        """SQLite: writes go to the store's writer thread and may be held back (``defer``)."""
        return self._writer is not None

    def defer(self, op: Callable[[Executes], Any]) -> None:
        """Run ``op`` on the writer with the unit's next statement or its end (``on_writer``)."""
        assert self._writer is not None
        self.wrote = True
        if self._direct is not None:
            op(self._direct)
            return
        self._deferred.append(op)

    async def insert_or_nothing(self, statement: Executable, params: Mapping[str, Any]) -> bool:
        """Insert one row; ``False`` if its key exists. Never leaves the transaction aborted."""
        if self.sql.conflict_free_inserts:
            return bool(await self.write(statement, params) == 1)
        try:
            await self.write(statement, params)
        except IntegrityError as exc:
            if _mysql_error_code(exc) == _MYSQL_DUPLICATE_KEY:
                return False
            raise
        return True

    async def _on_writer(self, op: Callable[[Connection], Any]) -> Any:
        assert self._writer is not None
        ops, self._deferred = [*self._deferred, op], []
        first = self._ticket is None
        if first:
            self._ticket = Ticket()
        assert self._ticket is not None
        try:
            return await self._writer.run(self._ticket, ops, first=first)
        except TimeoutError:
            self._ticket = None
            raise locked_error() from None

    async def _connect(self) -> AsyncConnection:
        self._conn = await self._engine.connect()
        return self._conn

    async def finish(self) -> None:
        """Commit what was written (or end a read-only transaction); return the connection."""
        conn, self._conn = self._conn, None
        try:
            if self._writer is not None and self.wrote:
                await self._finish_on_writer()
        finally:
            if conn is not None:
                await _end(conn, commit=self.wrote and self._writer is None)

    async def _finish_on_writer(self) -> None:
        assert self._writer is not None
        ops, self._deferred = self._deferred, []
        first = self._ticket is None
        ticket = self._ticket = self._ticket or Ticket()
        try:
            await self._writer.run(ticket, ops, first=first, end=True)
        except TimeoutError:
            raise locked_error() from None
        finally:
            self._ticket = None

    async def abort(self) -> None:
        conn, self._conn = self._conn, None
        ticket, self._ticket = self._ticket, None
        self._deferred = []
        self.changed_runs.clear()
        try:
            if ticket is not None and self._writer is not None:
                await self._writer.abort(ticket)
        finally:
            if conn is not None:
                await _end(conn, commit=False)


def _itself(result: CursorResult[Any]) -> CursorResult[Any]:
    return result


def locked_error() -> StoreError:
    """Queued for the writer as long as SQLite itself would (``busy_timeout``), no longer."""
    return StoreError(
        "database is locked: another unit of work kept writing for "
        f"{SQLITE_BUSY_TIMEOUT_MS} ms (a nested writing unit in one task never finishes)"
    )


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
