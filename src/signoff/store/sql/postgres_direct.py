"""PostgreSQL: a unit's transaction is asyncpg's own, and its writes go straight to asyncpg.

A PostgreSQL unit takes a pooled connection, switches SQLAlchemy's side of it to driver-level
autocommit (``isolation_level="AUTOCOMMIT"``: SQLAlchemy then begins and ends nothing on it) and
opens a transaction of its own on the documented raw connection
(``AsyncConnection.get_raw_connection()`` -> ``driver_connection``, the ``asyncpg.Connection``)
with asyncpg's public ``Connection.transaction()``. Every statement of the unit runs inside that
one transaction: those SQLAlchemy executes (reads, statements built per call) and those sent
here straight to asyncpg. The transaction is never shared with one SQLAlchemy tracks, so neither
side can believe it is in a state the other left.

The statements stay SQLAlchemy Core, compiled by SQLAlchemy's asyncpg dialect - once per
statement object and parameter names (the store's statements are built once), through public
compiled attributes (``string``, ``positiontup``, ``binds``, ``construct_params()``) and bind
processors from each type's ``dialect_impl(dialect).bind_processor(dialect)``. What is skipped
is SQLAlchemy's per-execution machinery around the driver call (a greenlet switch, the execution
context, result set-up): on PostgreSQL it cost ~0.2 ms of CPU per statement, more than asyncpg
itself. asyncpg's own statement cache prepares each statement once per connection.

A driver error is raised as SQLAlchemy's ``DBAPIError`` subclass that an ordinary execution
raises for it (a unique violation is an ``IntegrityError`` whose ``orig`` carries the ``pgcode``),
mapped from asyncpg's public exception classes as SQLAlchemy's asyncpg dialect maps them, and a
lost connection is invalidated.

Only writes whose answer needs no result processing and whose text is the same for every call
take this way (row counts, plain integers and text; no ``IN`` list expanded per call); anything
else goes through SQLAlchemy's ``AsyncConnection``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast

try:
    import asyncpg
except ImportError:  # no postgres extra: engine.require names it before a PostgreSQL unit runs
    asyncpg = None
from sqlalchemy import exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.selectable import Select
from sqlalchemy.types import ARRAY

from signoff.store.sql.direct import (
    Rows,
    bind_processor,
    fields_of,
    plain_columns,
    remembered,
    returned_columns,
)

_COUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|MERGE|INSERT \d+) (\d+)")


class Plan:
    """One statement compiled for asyncpg, for one set of parameter names."""

    __slots__ = ("compiled", "expands", "fields", "keys", "order", "processors", "sql")

    def __init__(self, statement: Executable, dialect: Dialect, keys: list[str]) -> None:
        compiled: Any = cast(Any, statement).compile(dialect=dialect, column_keys=keys)
        self.sql: str = compiled.string
        self.expands = bool(compiled.post_compile_params or compiled.literal_execute_params)
        self.order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.compiled = compiled
        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
            _processor(compiled.binds[name].type, dialect) for name in self.order
        )
        self.keys: tuple[str, ...] = tuple(str(c.key) for c in _returned(statement))
        self.fields = fields_of(compiled, self.order, self.processors, keys)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments as SQLAlchemy's ``construct_params`` builds them, from
        where each comes from (``direct.fields_of``, worked out once) when it is known."""
        fields = self.fields
        if fields is None or not params:
            return self._constructed(params)
        out = []
        for key, name, required, constant, processor in fields:
            if key in params:
                value = params[key]
            elif name in params:
                value = params[name]
            elif required:
                return self._constructed(params)  # raises SQLAlchemy's own error
            else:
                value = constant
            out.append(processor(value) if processor is not None and value is not None else value)
        return out

    def _constructed(self, params: Mapping[str, Any]) -> list[Any]:
        values = self.compiled.construct_params(params)
        return [
            processor(value) if processor is not None and value is not None else value
            for value, processor in zip(
                [values[name] for name in self.order], self.processors, strict=True
            )
        ]


def _processor(kind: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """The bind processor, except for an ``ARRAY`` of a type that needs no processing (its
    processor only copies the list; asyncpg takes the list as it is)."""
    if isinstance(kind, ARRAY) and bind_processor(kind.item_type, dialect) is None:
        return None
    return bind_processor(kind, dialect)


def _returned(statement: Executable) -> list[Any]:
    if isinstance(statement, UpdateBase):
        return returned_columns(statement)
    if isinstance(statement, Select):
        return list(statement.selected_columns)
    return []


def _plannable(statement: Executable, dialect: Dialect) -> bool:
    if isinstance(statement, UpdateBase | Select):
        return plain_columns(_returned(statement), dialect)
    return False


Plans = dict[tuple[int, tuple[str, ...]], tuple[Executable, Plan | None]]


def plan_for(
    plans: Plans, statement: Executable, dialect: Dialect, params: Mapping[str, Any]
) -> Plan | None:
    """The statement's plan for these parameter names, compiled once per store
    (``direct.remembered``); ``None``: not for the direct way."""
    keys = tuple(sorted(params))

    def build() -> Plan | None:
        if not _plannable(statement, dialect):
            return None
        plan = Plan(statement, dialect, list(keys))
        # ``IN`` lists and the like are rendered per call: SQLAlchemy's way.
        return None if plan.expands else plan

    return remembered(plans, (id(statement), keys), statement, build)


async def begin(conn: AsyncConnection) -> tuple[Any, Any]:
    """Open the unit's own transaction on ``conn``'s asyncpg connection; answers that
    ``asyncpg.Connection`` and its ``Transaction``. SQLAlchemy's side of the connection is in
    driver-level autocommit (the store's PostgreSQL engine is
    ``execution_options(isolation_level="AUTOCOMMIT")``), so it begins nothing of its own; its
    statements run inside this transaction.

    Cancelled (or failing) while ``BEGIN`` is in flight, what the server holds is unknown: the
    connection is invalidated, never sent back to the pool inside a transaction
    (tests/store/test_postgres_cancellation.py)."""
    sync = conn.sync_connection
    assert sync is not None
    if not _autocommit(sync):
        raise exc.InvalidRequestError("a PostgreSQL unit needs an AUTOCOMMIT connection")
    try:
        driver = _driver(conn)
        transaction = driver.transaction(isolation="read_committed")
        await transaction.start()
        sync.begin()  # SQLAlchemy's side (driver-level autocommit): sends nothing
    except Exception as error:
        raise await _translated(conn, "BEGIN", {}, error) from error
    except BaseException:
        await conn.invalidate()
        raise
    return driver, transaction


def _autocommit(sync: Any) -> bool:
    return bool(sync.get_execution_options().get("isolation_level") == "AUTOCOMMIT")


def _driver(conn: AsyncConnection) -> Any:
    """The asyncpg connection: ``conn``'s pooled connection's documented ``driver_connection``
    (what ``AsyncConnection.get_raw_connection()`` answers, without its greenlet hop)."""
    sync = conn.sync_connection
    assert sync is not None
    return sync.connection.driver_connection


async def execute(conn: AsyncConnection, driver: Any, plan: Plan, params: Mapping[str, Any]) -> Any:
    """Run ``plan`` on the connection's asyncpg connection, inside the unit's transaction
    (``begin``; ``driver`` is the asyncpg connection it answered). Answers ``Rows``, read by the stores' extractors like a ``CursorResult``."""
    try:
        args = plan.args(params)
        if plan.keys:
            rows = await driver.fetch(plan.sql, *args)
            count = len(rows)
        else:
            rows = []
            found = _COUNT.match(await driver.execute(plan.sql, *args) or "")
            count = int(found.group(1)) if found else -1
    except exc.SQLAlchemyError:
        raise  # a missing required value: SQLAlchemy's own error, nothing was sent
    except Exception as error:
        raise await _translated(conn, plan.sql, params, error) from error
    except BaseException:
        # Cancelled (or exiting) mid-call: what the driver and the server hold is unknown.
        # SQLAlchemy's own execution invalidates the connection here; so must this.
        await conn.invalidate()
        raise
    return Rows(count, plan.keys, rows)


async def end(conn: AsyncConnection, transaction: Any, *, commit: bool) -> None:
    """Commit or roll back the unit's transaction (``begin``), then SQLAlchemy's (logical)
    one, so the ``Connection``'s ``commit`` event still fires."""
    if conn.invalidated:  # lost (and invalidated) by a statement: nothing left to end
        if commit:
            raise exc.PendingRollbackError("the connection was lost; nothing was committed")
        sync = conn.sync_connection
        assert sync is not None
        sync.rollback()
        return
    try:
        await (transaction.commit() if commit else transaction.rollback())
    except Exception as error:
        raise await _translated(conn, "COMMIT" if commit else "ROLLBACK", {}, error) from error
    # SQLAlchemy's side, in driver-level autocommit: sends nothing; its ``commit`` event fires.
    sync = conn.sync_connection
    assert sync is not None
    if commit:
        sync.commit()
    else:
        sync.rollback()


class DriverError(Exception):
    """asyncpg's error as the ``orig`` of SQLAlchemy's ``DBAPIError``, with the fields an
    ordinary execution's ``orig`` has (``pgcode``/``sqlstate``, ``detail``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"<{type(error).__name__}>: {error}")
        self.pgcode: str | None = getattr(error, "sqlstate", None)
        self.sqlstate = self.pgcode
        self.detail: str | None = getattr(error, "detail", None)


# SQLAlchemy's asyncpg dialect maps asyncpg's public exception classes so (most specific first).
_KINDS: tuple[tuple[type[BaseException], type[exc.DBAPIError]], ...] = ()
_LOST: tuple[type[BaseException], ...] = (OSError,)
if asyncpg is not None:
    _KINDS = (
        (asyncpg.exceptions.IntegrityConstraintViolationError, exc.IntegrityError),
        (asyncpg.exceptions.SyntaxOrAccessError, exc.ProgrammingError),
        (asyncpg.exceptions.InternalServerError, exc.InternalError),
        (asyncpg.exceptions.InterfaceError, exc.InterfaceError),
        (asyncpg.exceptions.InternalClientError, exc.InternalError),
    )
    _LOST = (
        asyncpg.exceptions.PostgresConnectionError,
        asyncpg.exceptions.ConnectionDoesNotExistError,
        OSError,
    )


async def _translated(
    conn: AsyncConnection, statement: str, params: Mapping[str, Any], error: Exception
) -> BaseException:
    """``error`` as SQLAlchemy raises it from an ordinary execution on this connection."""
    if not isinstance(error, asyncpg.exceptions.PostgresError | asyncpg.InterfaceError | OSError):
        return error
    driver: Any = None
    if not conn.invalidated:
        try:
            driver = _driver(conn)
        except Exception:  # already unusable: treated as lost below
            driver = None
    lost = driver is None or driver.is_closed() or isinstance(error, _LOST)
    if lost and not conn.invalidated:
        await conn.invalidate()
    kind = next((k for cls, k in _KINDS if isinstance(error, cls)), exc.DBAPIError)
    sync = conn.sync_connection
    return kind(
        statement,
        dict(params),
        DriverError(error),
        hide_parameters=bool(sync is not None and sync.engine.hide_parameters),
        connection_invalidated=lost,
    )
