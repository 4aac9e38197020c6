"""``SqlStore``: units of work over one async engine, and waiting for a run to change."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff.core.ports import StoreUnit
from signoff.store.faults import DecodeFaults
from signoff.store.sql.direct import DirectConnection, Plans
from signoff.store.sql.links import SqlLinkStore
from signoff.store.sql.notify import ChangeNotifier
from signoff.store.sql.postgres_direct import Plans as PgPlans
from signoff.store.sql.postgres_heads import ChainHeads
from signoff.store.sql.postgres_unit import PostgresUnit
from signoff.store.sql.statements import statements_for
from signoff.store.sql.unit import SqlUnit, locked_error
from signoff.store.sql.workers import SqlWorkerRegistry
from signoff.store.sql.writer import SqliteWriter

DEFAULT_POLL_INTERVAL = 0.5
T = TypeVar("T")


class SqlStore:
    """The durable ``Store``. Build it with ``open_sql_store`` (which checks the schema)."""

    def __init__(
        self, engine: AsyncEngine, *, poll_interval: float = DEFAULT_POLL_INTERVAL
    ) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.poll_interval = poll_interval
        self._sql = statements_for(self.dialect)
        self._notifier = ChangeNotifier()
        # SQLite has one writer per file: this store's writes all go through it (writer.py).
        self.writer = SqliteWriter(engine.url) if self.dialect == "sqlite" else None
        self._workers = SqlWorkerRegistry(engine, self.writer)
        self.decode_faults = DecodeFaults()
        self._links = SqlLinkStore(engine)
        self._plans: Plans = {}  # the writer thread's compiled statements (direct.py)
        # PostgreSQL: chain heads as last committed here, per-tenant turns (postgres_heads.py).
        self._heads = ChainHeads() if self.dialect == "postgresql" else None
        self._pg_plans: PgPlans = {}  # PostgreSQL: statements compiled for asyncpg
        # PostgreSQL units: connections in driver-level autocommit (postgres_direct.begin).
        self._pg_engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    @property
    def workers(self) -> SqlWorkerRegistry:
        """Heartbeats of runtime incarnations (each its own small transaction)."""
        return self._workers

    @property
    def links(self) -> SqlLinkStore:
        """One-time decision links (each issue or redeem its own small transaction)."""
        return self._links

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[StoreUnit]:
        """One transaction: committed on a clean exit, rolled back on any error."""
        unit: SqlUnit
        if self._heads is not None:
            unit = PostgresUnit(
                self._pg_engine, self._sql, self.decode_faults, self._heads, self._pg_plans
            )
        else:
            unit = SqlUnit(self.engine, self._sql, self.writer, self.decode_faults)
        try:
            yield unit
        except BaseException:
            await unit.abort()
            raise
        await unit.finish()
        if unit.changed_runs:
            self._notifier.notify(unit.changed_runs)

    async def run_unit(self, body: Callable[[StoreUnit], Awaitable[T]]) -> T:
        """A whole unit of work (``WholeUnits``), committed like ``unit()``.

        SQLite: ``body`` runs entirely on the writer thread as one job (one hop), in its own
        savepoint of the group commit, and is answered after the fsync of its batch; if it raises,
        it is rolled back to its savepoint alone. PostgreSQL and MySQL: ``unit()``'s."""
        if self.writer is None:
            async with self.unit() as unit:
                return await body(unit)
        unit = SqlUnit(self.engine, self._sql, self.writer, self.decode_faults)
        context = contextvars.copy_context()

        def whole(conn: Connection) -> T:
            direct = DirectConnection(conn, self._plans)
            unit.bind(direct)
            try:
                return context.run(_drive, body(unit))
            finally:
                unit.bind(None)
                direct.close()

        try:
            value: T = await self.writer.unit_of_one(whole)
        except TimeoutError:
            raise locked_error() from None
        if unit.changed_runs:
            self._notifier.notify(unit.changed_runs)
        return value

    async def wait_for_change(self, run_id: str, version: int, timeout: float) -> None:
        """Return once the stored version differs from ``version``, or after ``timeout``.

        A commit made through this store object wakes the waiter at once (in-process notifier).
        A commit made by another process is seen by polling the version every
        ``poll_interval`` seconds (0.5 by default). PostgreSQL LISTEN/NOTIFY is deliberately not
        used: a notifying transaction takes a database-wide lock at commit, which would serialise
        every run write of every instance to speed up a rare long-poll.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            waiter = self._notifier.watch(run_id)
            try:
                current = await self._version_of(run_id)
                if current is not None and current != version:
                    return
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                await waiter.wait(min(remaining, self.poll_interval))
            finally:
                self._notifier.unwatch(run_id, waiter)

    async def _version_of(self, run_id: str) -> int | None:
        async with self.engine.connect() as conn:
            result = await conn.execute(self._sql.run_version, {"b_run_id": run_id})
            version: int | None = result.scalar_one_or_none()
            await conn.rollback()
        return version

    @property
    def sync_engines(self) -> list[Engine]:
        """The engines whose connections commit units of work (for ``commit`` listeners)."""
        engines = [self.engine.sync_engine]
        if self.writer is not None:
            engines.append(self.writer.engine)
        return engines

    async def close(self) -> None:
        try:
            await self._workers.close()
            if self.writer is not None:
                await self.writer.close()
        finally:
            await self.engine.dispose()


def _drive(awaitable: Awaitable[T]) -> T:
    """Run a body that awaits only a bound unit's ports: it finishes without ever suspending."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    raise RuntimeError("a whole unit of work awaited something other than its store")
