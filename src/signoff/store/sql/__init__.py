"""Durable stores on SQLAlchemy 2 (async): SQLite by default, PostgreSQL, MySQL/MariaDB.

``open_sql_store(url)`` builds the engine, makes sure the schema is current and returns a
``SqlStore``. The embedded SQLite default upgrades itself; PostgreSQL and MySQL refuse to start on
an out-of-date schema (``SchemaOutOfDate`` names ``signoff db upgrade``) because several servers
may share the database and migrating it is an operator's decision.
"""

from __future__ import annotations

import sqlalchemy.exc

from signoff.store.errors import StoreError, StoreUnavailable
from signoff.store.sql.engine import create_engine
from signoff.store.sql.migrate import check_schema, current_revision, head_revision, upgrade_schema
from signoff.store.sql.store import DEFAULT_POLL_INTERVAL, SqlStore

__all__ = [
    "SqlStore",
    "StoreError",
    "create_engine",
    "head_revision",
    "open_sql_store",
    "schema_status",
    "upgrade_database",
]


async def open_sql_store(
    url: str,
    *,
    upgrade: bool | None = None,
    pool_size: int = 10,
    max_overflow: int = 30,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
) -> SqlStore:
    """Open the store at ``url``. ``upgrade=None``: only SQLite applies migrations by itself."""
    engine = create_engine(url, pool_size=pool_size, max_overflow=max_overflow)
    try:
        if upgrade is None:
            upgrade = engine.dialect.name == "sqlite"
        try:
            if upgrade:
                await upgrade_schema(engine)
            else:
                await check_schema(engine)
        except (OSError, sqlalchemy.exc.DBAPIError) as exc:
            raise StoreUnavailable(f"cannot use {_safe(engine)}: {_first_line(exc)}") from exc
    except BaseException:
        await engine.dispose()
        raise
    return SqlStore(engine, poll_interval=poll_interval)


async def upgrade_database(url: str) -> tuple[str | None, str]:
    """``signoff db upgrade``: apply every missing migration. Returns (before, after)."""
    engine = create_engine(url, pool_size=1, max_overflow=0)
    try:
        try:
            return await upgrade_schema(engine)
        except (OSError, sqlalchemy.exc.DBAPIError) as exc:
            raise StoreUnavailable(f"cannot use {_safe(engine)}: {_first_line(exc)}") from exc
    finally:
        await engine.dispose()


async def schema_status(url: str) -> tuple[str | None, str]:
    """``signoff db status``: (the database's revision, the revision this signoff needs)."""
    engine = create_engine(url, pool_size=1, max_overflow=0)
    try:
        try:
            return await current_revision(engine), head_revision()
        except (OSError, sqlalchemy.exc.DBAPIError) as exc:
            raise StoreUnavailable(f"cannot use {_safe(engine)}: {_first_line(exc)}") from exc
    finally:
        await engine.dispose()


def _safe(engine: object) -> str:
    url = getattr(engine, "url", None)
    return url.render_as_string(hide_password=True) if url is not None else "the database"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.strip().splitlines()[0]
