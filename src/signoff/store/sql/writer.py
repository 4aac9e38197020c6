"""SQLite's one writer: a sync connection on a dedicated thread, with group commit.

SQLite admits one writer per database file, so this process has exactly one writing connection,
owned by one thread. A unit of work sends it *jobs*: each job is the unit's writes since its
previous job (writes nobody needs an answer for are held back and ride along), plus at most one
operation whose answer the unit is waiting for. One job is one thread hop.

Group commit: the writer keeps one transaction open across consecutive units. Each unit runs
inside its own SAVEPOINT, strictly one unit after another (a savepoint stack cannot interleave).
When a unit ends cleanly its savepoint is released and the unit joins the *batch*; the batch is
committed (one COMMIT, one fsync under ``synchronous=FULL``) as soon as no other unit is waiting
to start, or when it reaches ``max_batch`` units. Only then are the batch's callers answered:
nobody hears "done" before the fsync that made their unit durable.

- A unit that fails (its body raised, or one of its statements did) is rolled back to its
  savepoint; the other units of the batch are untouched.
- If COMMIT fails, or SQLite itself rolls the whole transaction back (an I/O error, a full disk),
  every unit of the batch fails with that error: none of them was acknowledged.
- A unit waits for its turn at most ``busy_timeout``, as a writer in another process would.
- Writers in other processes still meet SQLite's lock: the batch transaction starts with
  ``BEGIN IMMEDIATE`` under ``busy_timeout``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection

from signoff.store.sql.engine import SQLITE_BUSY_TIMEOUT_MS
from signoff.store.sql.replies import Reply, TurnTimedOut

Op = Callable[[Connection], Any]
DEFAULT_MAX_BATCH = 64
_SAVEPOINT = "signoff_unit"


class Ticket:
    """One unit of work as the writer sees it. Its fields are touched by the writer thread only."""

    __slots__ = ("broken", "done", "savepoint", "value")

    def __init__(self) -> None:
        self.savepoint = False  # inside its SAVEPOINT (``_SAVEPOINT``)
        self.done: Reply | None = None  # answered once the batch holding this unit commits
        self.value: Any = None  # the answer of its last job, sent with ``done``
        self.broken: BaseException | None = None  # its transaction was lost


class _Job:
    __slots__ = ("end", "ops", "reply", "ticket")

    def __init__(self, ticket: Ticket, ops: Sequence[Op], end: bool, reply: Reply) -> None:
        self.ticket = ticket
        self.ops = ops
        self.end = end
        self.reply = reply


class _Abort:
    __slots__ = ("reply", "ticket")

    def __init__(self, ticket: Ticket, reply: Reply) -> None:
        self.ticket = ticket
        self.reply = reply


class _Expired(_Abort):
    """A unit's turn is over: refuse it if it has not begun (``reply`` is the unit's own)."""

    __slots__ = ()


class SqliteWriter:
    """The writing connection of one ``SqlStore`` on SQLite, and the thread that owns it."""

    def __init__(self, url: URL, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.engine = sa.create_engine(
            url.set(drivername="sqlite+pysqlite"), poolclass=sa.pool.NullPool
        )
        event.listen(self.engine, "connect", _configure)
        event.listen(self.engine, "begin", _begin_immediate)
        self.max_batch = max_batch
        self._inbox: deque[_Job | _Abort | None] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        # Writer-thread state.
        self._conn: Connection | None = None
        self._active: Ticket | None = None
        self._waiting: deque[_Job] = deque()
        self._batch: list[Ticket] = []
        # Called on the writer thread after every job with (units waiting, units uncommitted).
        self.observer: Callable[[int, int], None] | None = None

    # ------------------------------------------------------------------ event loop side
    async def run(
        self, ticket: Ticket, ops: Sequence[Op], *, first: bool = False, end: bool = False
    ) -> Any:
        """Run ``ops`` in ``ticket``'s savepoint; the last op's value is the answer.

        The unit's ``first`` job may wait for its turn, at most ``busy_timeout`` (then
        ``TimeoutError``). ``end``: release the savepoint and answer (the last op's value) only
        once the batch holding the unit has committed.
        """
        reply = Reply()
        self._send(_Job(ticket, ops, end, reply))
        if not first:
            return await reply.future
        # When the bound is up, the writer decides: a unit that has not begun is taken out of
        # the queue and refused (``TurnTimedOut``); one that has begun runs, and is answered
        # with its real outcome, as every unit is (never "refused" for a unit that commits).
        expired = _Expired(ticket, reply)
        return await reply.within(SQLITE_BUSY_TIMEOUT_MS / 1000, lambda: self._send(expired))

    async def unit_of_one(self, op: Op) -> Any:
        """``op`` as a unit of its own, in one hop (a heartbeat, a whole unit of work): it rides
        the group commit like any unit; its value is answered after the commit's fsync."""
        return await self.run(Ticket(), [op], first=True, end=True)

    async def abort(self, ticket: Ticket) -> None:
        """Roll the unit back to its savepoint, or take it out of the queue."""
        reply = Reply()
        self._send(_Abort(ticket, reply))
        await reply.future

    @property
    def units_waiting(self) -> int:
        """Units queued behind the active one (observability; tests wait on it)."""
        return len(self._waiting)

    @property
    def units_uncommitted(self) -> int:
        """Units released into the open batch, not yet committed."""
        return len(self._batch)

    def _send(self, item: _Job | _Abort | None) -> None:
        with self._wake:
            if self._thread is None:
                if item is None or isinstance(item, _Expired):
                    return  # closed: nothing to stop, nobody waiting for a turn
                self._thread = threading.Thread(
                    target=self._main, name="signoff-sqlite-writer", daemon=True
                )
                self._thread.start()
            self._inbox.append(item)
            self._wake.notify()

    async def close(self) -> None:
        thread = self._thread
        self._send(None)
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
        self._thread = None
        self.engine.dispose()

    # ------------------------------------------------------------------ writer thread side
    def _main(self) -> None:
        while True:
            with self._wake:
                while not self._inbox:
                    self._wake.wait()
                item = self._inbox.popleft()
                more = bool(self._inbox)
            if item is None:
                self._shutdown()
                return
            if isinstance(item, _Expired):
                self._expire(item)
            elif isinstance(item, _Abort):
                self._abort(item)
            else:
                self._accept(item)
            # Jobs already in the inbox may be units ready to join the batch: take them first.
            self._next(commit=not more)
            if self.observer is not None:
                self.observer(len(self._waiting), len(self._batch))

    def _accept(self, job: _Job) -> None:
        ticket = job.ticket
        if ticket.broken is not None:
            job.reply.send(error=ticket.broken)
        elif self._active is ticket:
            self._execute(job)
        elif self._active is None and not self._waiting:
            self._begin_unit(job)
        else:
            self._waiting.append(job)

    def _begin_unit(self, job: _Job) -> None:
        try:
            conn = self._connection()
            if not conn.in_transaction():
                conn.begin()
            _raw(conn, f"SAVEPOINT {_SAVEPOINT}")
            job.ticket.savepoint = True
        except BaseException as exc:
            self._lost(exc)
            job.ticket.broken = exc
            job.reply.send(error=exc)
            return
        self._active = job.ticket
        self._execute(job)

    def _execute(self, job: _Job) -> None:
        ticket = job.ticket
        conn = self._connection()
        value: Any = None
        try:
            for op in job.ops:
                value = op(conn)
            if job.end:
                assert ticket.savepoint
                _raw(conn, f"RELEASE {_SAVEPOINT}")  # the unit now rides on the batch
        except BaseException as exc:
            if not _in_transaction(conn):
                self._lost(exc)  # SQLite rolled everything back: the whole batch failed
            elif job.end:
                self._rollback_unit(ticket)
            job.reply.send(error=exc)  # mid-unit: the unit decides (its body aborts)
            return
        if not job.end:
            job.reply.send(value)
            return
        ticket.savepoint = False
        ticket.done = job.reply
        ticket.value = value
        self._active = None
        self._batch.append(ticket)

    def _abort(self, abort: _Abort) -> None:
        ticket = abort.ticket
        queued = self._unqueue(ticket)
        if queued is not None:
            queued.reply.cancel()
        if self._active is ticket:
            self._rollback_unit(ticket)
        abort.reply.send()

    def _expire(self, expired: _Expired) -> None:
        queued = self._unqueue(expired.ticket)
        if queued is not None:
            queued.reply.send(error=TurnTimedOut())
        # Else begun already (running, in the open batch, or answered): its outcome is its answer.

    def _unqueue(self, ticket: Ticket) -> _Job | None:
        """Take ``ticket``'s job out of the queue, if it is still waiting to begin."""
        for job in self._waiting:
            if job.ticket is ticket:
                self._waiting.remove(job)
                return job
        return None

    def _rollback_unit(self, ticket: Ticket) -> None:
        savepoint, ticket.savepoint = ticket.savepoint, False
        self._active = None
        if not savepoint:
            return
        try:
            conn = self._connection()
            _raw(conn, f"ROLLBACK TO {_SAVEPOINT}")
            _raw(conn, f"RELEASE {_SAVEPOINT}")
        except BaseException as exc:
            self._lost(exc)

    def _next(self, *, commit: bool) -> None:
        """Start the next waiting unit; commit the batch when nobody else is ready to join."""
        while self._active is None:
            if self._waiting and len(self._batch) < self.max_batch:
                self._begin_unit(self._waiting.popleft())
            elif self._batch and (commit or len(self._batch) >= self.max_batch):
                self._commit()
            else:
                if commit and self._conn is not None and self._conn.in_transaction():
                    self._end_empty(self._conn)  # only failed units since the last commit
                return

    def _commit(self) -> None:
        batch, self._batch = self._batch, []
        conn = self._connection()
        try:
            conn.commit()
        except BaseException as exc:
            self._discard_connection()
            for ticket in batch:
                _answer(ticket, error=exc)
            return
        for ticket in batch:
            _answer(ticket)

    def _end_empty(self, conn: Connection) -> None:
        try:
            conn.rollback()
        except BaseException:
            self._discard_connection()

    def _lost(self, exc: BaseException) -> None:
        """The transaction is gone: fail every unit of the batch and the active one."""
        batch, self._batch = self._batch, []
        for ticket in batch:
            _answer(ticket, error=exc)
        if self._active is not None:
            self._active.savepoint = False
            self._active.broken = exc
            self._active = None
        self._discard_connection()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self.engine.connect()
        return self._conn

    def _discard_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.invalidate()
            conn.close()
        except BaseException:  # already broken; the next job reconnects
            pass

    def _shutdown(self) -> None:
        closing = RuntimeError("the store was closed")
        for job in self._waiting:
            job.reply.send(error=closing)
        self._waiting.clear()
        if self._active is not None:
            self._rollback_unit(self._active)
        if self._batch:
            self._commit()
        conn, self._conn = self._conn, None
        if conn is not None:
            if conn.in_transaction():
                conn.rollback()
            conn.close()


def _raw(conn: Connection, sql: str) -> None:
    """A savepoint statement on the DB-API connection: one name (units never nest), nothing
    for SQLAlchemy to compile (its savepoint names change with every unit)."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    dbapi.execute(sql)


def _answer(ticket: Ticket, error: BaseException | None = None) -> None:
    done, ticket.done = ticket.done, None
    value, ticket.value = ticket.value, None
    if done is not None:
        done.send(value if error is None else None, error)


def _in_transaction(conn: Connection) -> bool:
    dbapi = conn.connection.dbapi_connection
    return bool(dbapi is not None and dbapi.in_transaction)


def _configure(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are ours (BEGIN IMMEDIATE below), so the driver must not start its own.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _begin_immediate(conn: Connection) -> None:
    # Sent on the DB-API connection (SQLAlchemy's execution machinery cost ten times the
    # statement); a driver error is raised as SQLAlchemy's, as ``exec_driver_sql`` would.
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    try:
        dbapi.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as error:
        raise exc.DBAPIError.instance("BEGIN IMMEDIATE", None, error, sqlite3.Error) from error
