"""PostgreSQL: a unit's writes sent straight to asyncpg, in the transaction SQLAlchemy tracks.

The statements stay SQLAlchemy Core, compiled by SQLAlchemy's asyncpg dialect - once per
statement object and parameter names (the store's statements are built once). What is skipped
is SQLAlchemy's per-execution machinery around the driver call (a greenlet switch, the execution
context, parameter processing, result set-up): on PostgreSQL it cost ~0.2 ms of CPU per
statement, more than asyncpg itself. Parameters go through the compiled statement's own bind
processors in its positional order; the prepared statement comes from the adapter's own cache
(the one SQLAlchemy uses for this connection, so each statement is parsed once per connection).

The transaction is the one SQLAlchemy's ``Connection`` and its asyncpg adapter track: a direct
statement first begins it there (no round trip; the adapter's ``BEGIN`` is sent with the first
statement as SQLAlchemy would), and ``commit``/``rollback`` end it on the adapter and then on
the ``Connection`` (whose ``commit`` event still fires), so direct and ordinary statements mix
freely in one unit. A driver error is translated by the adapter and raised as SQLAlchemy's
``DBAPIError`` subclass, exactly as an ordinary execution raises it (a unique violation is an
``IntegrityError`` whose ``orig`` carries the ``pgcode``), and a lost connection is invalidated.

Only writes whose answer needs no result processing and whose text is the same for every call
take this way (row counts, plain integers and text; no ``IN`` list expanded per call); anything
else goes through SQLAlchemy's ``AsyncConnection``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from sqlalchemy import exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.selectable import Select
from sqlalchemy.types import ARRAY

from signoff.store.sql.direct import Rows, plain_columns, remembered

_COUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|MERGE|INSERT \d+) (\d+)")


class Plan:
    """One statement compiled for asyncpg, for one set of parameter names."""

    __slots__ = ("defaults", "expands", "keys", "order", "processors", "sql")

    def __init__(self, statement: Executable, dialect: Dialect, keys: list[str]) -> None:
        compiled: Any = cast(Any, statement).compile(dialect=dialect, column_keys=keys)
        self.sql: str = compiled.string
        self.expands = bool(compiled.post_compile_params or compiled.literal_execute_params)
        self.order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.processors: dict[str, Callable[[Any], Any]] = {
            name: processor
            for name, processor in compiled._bind_processors.items()
            if not _copies_only(compiled.binds[name].type, dialect)
        }
        # Values bound in the statement itself (literals, ``.values(state=...)``).
        self.defaults: dict[str, Any] = compiled.construct_params(_check=False)
        self.keys: tuple[str, ...] = tuple(_returned(statement))

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        processors = self.processors
        defaults = self.defaults
        out = []
        for name in self.order:
            value = params[name] if name in params else defaults[name]
            processor = processors.get(name)
            out.append(processor(value) if processor is not None and value is not None else value)
        return out


def _copies_only(kind: Any, dialect: Dialect) -> bool:
    """An ``ARRAY`` of a type that needs no processing: its processor only copies the list."""
    return isinstance(kind, ARRAY) and kind.item_type._cached_bind_processor(dialect) is None


def _returned(statement: Executable) -> list[str]:
    if isinstance(statement, UpdateBase):
        return [str(getattr(c, "key", c)) for c in statement._returning]
    if isinstance(statement, Select):
        return [str(c.key) for c in statement.selected_columns]
    return []


def _plannable(statement: Executable, dialect: Dialect) -> bool:
    if isinstance(statement, UpdateBase):
        return plain_columns(statement._returning, dialect)
    if isinstance(statement, Select):
        return plain_columns(statement.selected_columns, dialect)
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


async def execute(conn: AsyncConnection, plan: Plan, params: Mapping[str, Any]) -> Any:
    """Run ``plan`` on the connection's asyncpg connection, in the connection's transaction.

    Answers ``Rows``, read by the stores' extractors like a ``CursorResult``."""
    sync = conn.sync_connection
    assert sync is not None
    if not sync.in_transaction():
        sync.begin()  # SQLAlchemy's begin sends nothing; the adapter's BEGIN follows
    adapter: Any = sync.connection.dbapi_connection
    dialect: Any = sync.dialect
    try:
        if adapter._transaction is None:
            await adapter._start_transaction()
        prepared, _ = await adapter._prepare(plan.sql, dialect._invalidate_schema_cache_asof)
        rows = await prepared.fetch(*plan.args(params))
        status = prepared.get_statusmsg()
    except Exception as error:
        raise await _translated(conn, plan.sql, params, error) from error
    except BaseException:
        # Cancelled (or exiting) mid-call: what the driver and the server hold is unknown (a
        # BEGIN may be in flight with no transaction recorded by the adapter). SQLAlchemy's own
        # execution invalidates the connection here; so must this, or it goes back to the pool
        # inside a transaction (tests/store/test_postgres_cancellation.py).
        await conn.invalidate()
        raise
    found = _COUNT.match(status or "")
    return Rows(int(found.group(1)) if found else -1, plan.keys, rows)


async def end(conn: AsyncConnection, *, commit: bool) -> None:
    """Commit or roll back the connection's transaction (its ``commit`` event fires)."""
    sync = conn.sync_connection
    assert sync is not None
    if sync.invalidated:  # lost (and invalidated) by a statement: nothing left to end
        if commit:
            raise exc.PendingRollbackError("the connection was lost; nothing was committed")
        sync.rollback()
        return
    adapter: Any = sync.connection.dbapi_connection
    transaction = adapter._transaction
    if transaction is not None:
        try:
            await adapter._call_and_discard(transaction.commit if commit else transaction.rollback)
        except Exception as error:
            raise await _translated(conn, "COMMIT" if commit else "ROLLBACK", {}, error) from error
    # The adapter's transaction is over: SQLAlchemy's end sends nothing more.
    if commit:
        sync.commit()
    else:
        sync.rollback()


async def _translated(
    conn: AsyncConnection, statement: str, params: Mapping[str, Any], error: Exception
) -> BaseException:
    """``error`` as SQLAlchemy raises it from an ordinary execution on this connection."""
    sync = conn.sync_connection
    assert sync is not None
    adapter: Any = sync.connection.dbapi_connection
    dialect: Any = sync.dialect
    dbapi = dialect.loaded_dbapi
    try:
        adapter._handle_exception(error)  # raises the adapter's translation
    except Exception as translated:
        error = translated
    if isinstance(error, (dbapi.InvalidCachedStatementError, dbapi.InternalServerError)):
        dialect._invalidate_schema_cache()
    if not isinstance(error, dbapi.Error):
        return error
    disconnect = dialect.is_disconnect(error, adapter, None)
    if disconnect:
        await conn.invalidate()
    wrapped: BaseException = exc.DBAPIError.instance(
        statement,
        dict(params),
        error,
        dbapi.Error,
        hide_parameters=sync.engine.hide_parameters,
        connection_invalidated=disconnect,
        dialect=dialect,
    )
    return wrapped
