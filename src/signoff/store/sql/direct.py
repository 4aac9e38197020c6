"""SQLite's writer thread: the store's writes sent straight to the driver's cursor.

A whole unit of work runs on the writer thread (``SqlStore.run_unit``), where the statements are
still SQLAlchemy Core, compiled by SQLAlchemy's SQLite dialect - once per statement object, since
the store's statements are built once (``statements.py``). What is skipped is the per-execution
machinery around the DB-API call (execution context, events, result set-up), which costs more
than the statement itself on SQLite: parameters go through the compiled statement's own bind
processors, in its own positional order, and a DB-API error is raised as SQLAlchemy's
``DBAPIError`` like any other.

Only writes whose answer needs no result processing take this way (row counts, ``RETURNING`` of
plain integers and text); reads, and anything else, go through SQLAlchemy's ``Connection``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.dml import UpdateBase

from signoff.store.sql.tables import UTCDateTime

_MAX_PLANS = 256
Plans = dict[tuple[int, tuple[str, ...], bool], tuple[Executable, "_Plan | None"]]


class Executes(Protocol):
    """``Connection`` or ``DirectConnection``: what a deferred write on the writer is given."""

    def execute(self, statement: Executable, params: Any = None, /) -> Any: ...


class _Plan:
    __slots__ = ("compiled", "fields", "keys", "order", "processors", "returns", "sql")

    def __init__(
        self, statement: UpdateBase, connection: Connection, keys: list[str], many: bool
    ) -> None:
        # As SQLAlchemy compiles it for these parameter names (an INSERT without ``values()``
        # takes its columns from them).
        dialect = connection.dialect
        compiled: Any = statement.compile(dialect=dialect, column_keys=keys, for_executemany=many)
        self.compiled = compiled
        self.sql: str = compiled.string
        self.order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
            _sqlite_processor(compiled.binds[name].type, dialect) for name in self.order
        )
        returning = returned_columns(statement)
        self.returns = bool(returning)
        self.keys: tuple[str, ...] = tuple(str(c.key) for c in returning)
        self.fields = fields_of(compiled, self.order, self.processors, keys)

    def args(self, params: Mapping[str, Any] | None) -> tuple[Any, ...]:
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
        return tuple(out)

    def _constructed(self, params: Mapping[str, Any] | None) -> tuple[Any, ...]:
        """The positional arguments as SQLAlchemy builds them (``construct_params``)."""
        values = self.compiled.construct_params(params)
        return tuple(
            processor(value) if processor is not None and value is not None else value
            for value, processor in zip(
                [values[name] for name in self.order], self.processors, strict=True
            )
        )


Field = tuple[str, str, bool, Any, "Callable[[Any], Any] | None"]


def fields_of(
    compiled: Any,
    order: tuple[str, ...],
    processors: tuple[Callable[[Any], Any] | None, ...],
    keys: list[str],
) -> tuple[Field, ...] | None:
    """Where each positional argument comes from (both direct ways), worked out once from the compiled statement's
    public attributes (``bind_names``, each bind's ``key``, ``value``, ``required``): a
    parameter by the bind's key, else by its name, else the bind's own value. ``None`` (every
    call then takes ``construct_params``) for what that does not describe - expanding,
    post-compiled, callable, escaped or repeated binds - and for any plan whose arguments,
    probed once with a distinct value per parameter name, differ from ``construct_params``'s."""
    if compiled.post_compile_params or compiled.literal_execute_params:
        return None
    if compiled.escaped_bind_names:
        return None
    by_name: dict[str, Any] = {}
    for bind, name in compiled.bind_names.items():
        if bind.expanding or bind.callable or name in by_name:
            return None
        by_name[name] = bind
    fields: list[Field] = []
    for name, processor in zip(order, processors, strict=True):
        bind = by_name.get(name)
        if bind is None:
            return None
        fields.append((bind.key, name, bool(bind.required), bind.value, processor))
    probe = {key: object() for key in keys}
    try:
        expected = compiled.construct_params(probe)
    except exc.SQLAlchemyError:
        return None
    for key, name, _, constant, _ in fields:
        got = probe.get(key, probe.get(name, constant))
        if got is not expected[name] and got != expected[name]:
            return None
    return tuple(fields)


def _sqlite_processor(kind: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """``bind_processor``, with SQLite's ``UTCDateTime`` in one step (``_utc_text``)."""
    return _utc_text if isinstance(kind, UTCDateTime) else bind_processor(kind, dialect)


def bind_processor(kind: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """What the dialect does to a value of ``kind`` before the driver gets it (the type's
    public ``dialect_impl(dialect).bind_processor(dialect)``)."""
    processor: Callable[[Any], Any] | None = kind.dialect_impl(dialect).bind_processor(dialect)
    return processor


def returned_columns(statement: UpdateBase) -> list[Any]:
    """The ``RETURNING`` columns of a DML statement (its public ``exported_columns``)."""
    return list(statement.exported_columns)


def _utc_text(value: datetime) -> str:
    """What ``UTCDateTime`` and SQLite's ``DATETIME`` processors make of an instant, in one step
    (naive UTC, ``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    if value.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]


def _same_keys(params: Sequence[Mapping[str, Any]]) -> bool:
    keys = params[0].keys() if params else set()
    return all(p.keys() == keys for p in params)


def plain_columns(columns: Iterable[Any], dialect: Dialect) -> bool:
    """Every column comes back as the driver reads it (no result processing): its rows may
    skip SQLAlchemy's result set-up. Both direct ways ask it (SQLite's writer, PostgreSQL)."""
    for column in columns:
        kind = getattr(column, "type", None)
        try:
            if kind is None or kind.dialect_impl(dialect).result_processor(dialect, None):
                return False
        except (TypeError, ValueError):  # a type that needs the column's server type
            return False
    return True


P = TypeVar("P")


def remembered(
    plans: dict[Any, tuple[Executable, P | None]],
    key: tuple[Any, ...],
    statement: Executable,
    build: Callable[[], P | None],
) -> P | None:
    """``statement``'s plan under ``key`` (its id and parameter names), built once: the stores'
    statements are built once, so at most ``_MAX_PLANS`` are kept, each with its statement
    (so its id stays unique); ``None``: not for the direct way."""
    found = plans.get(key)
    if found is not None and found[0] is statement:
        return found[1]
    plan = build()
    if len(plans) < _MAX_PLANS:
        plans[key] = (statement, plan)
    return plan


class Rows:
    """The part of ``CursorResult`` the stores read from a write."""

    __slots__ = ("_keys", "_rows", "rowcount")

    def __init__(self, rowcount: int, keys: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        self.rowcount = rowcount
        self._keys = keys
        self._rows = rows

    def mappings(self) -> Rows:
        return self

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(zip(self._keys, row, strict=True)) for row in self._rows)

    def one(self) -> dict[str, Any]:
        if len(self._rows) != 1:
            raise (
                exc.NoResultFound("expected one row")
                if not self._rows
                else exc.MultipleResultsFound("expected one row")
            )
        return dict(zip(self._keys, self._rows[0], strict=True))

    def one_or_none(self) -> dict[str, Any] | None:
        return None if not self._rows else self.one()

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else next(iter(row.values()))


class DirectConnection:
    """The writer's connection for a whole unit: ``execute`` like ``Connection.execute``."""

    __slots__ = ("_cursor", "_plans", "connection")

    def __init__(self, connection: Connection, plans: Plans) -> None:
        self.connection = connection
        self._plans = plans
        driver = connection.connection.driver_connection  # the documented raw connection
        assert driver is not None
        self._cursor: Any = driver.cursor()

    def execute(
        self,
        statement: Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> Any:
        if isinstance(params, list | tuple):
            return self._execute_many(statement, params)
        one = cast("Mapping[str, Any] | None", params)
        plan = self._plan(statement, sorted(one or ()), False)
        if plan is None:
            return self.connection.execute(statement, one)
        cursor = self._cursor
        try:
            cursor.execute(plan.sql, plan.args(one))
            rows = cursor.fetchall() if plan.returns else []
            return Rows(cursor.rowcount, plan.keys, rows)
        except sqlite3.Error as error:
            raise exc.DBAPIError.instance(plan.sql, one, error, sqlite3.Error) from error

    def _execute_many(self, statement: Executable, params: Sequence[Mapping[str, Any]]) -> Any:
        plan = self._plan(statement, sorted(params[0] if params else ()), True)
        if plan is None or not _same_keys(params):
            return self.connection.execute(statement, params)
        try:
            self._cursor.executemany(plan.sql, [plan.args(p) for p in params])
            return Rows(self._cursor.rowcount, plan.keys, [])
        except sqlite3.Error as error:
            raise exc.DBAPIError.instance(plan.sql, params, error, sqlite3.Error) from error

    def _plan(self, statement: Executable, keys: list[str], many: bool) -> _Plan | None:
        def build() -> _Plan | None:
            if not isinstance(statement, UpdateBase):
                return None
            if not plain_columns(returned_columns(statement), self.connection.dialect):
                return None
            return _Plan(statement, self.connection, keys, many)

        return remembered(self._plans, (id(statement), tuple(keys), many), statement, build)

    def close(self) -> None:
        self._cursor.close()
