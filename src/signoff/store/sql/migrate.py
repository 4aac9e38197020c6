"""Alembic, run programmatically from the migrations shipped inside this package.

``upgrade`` serialises concurrent callers with a lock the database holds for us (SQLite: the write
lock of ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock; MySQL: a named
``GET_LOCK``), so several processes starting at once migrate exactly once.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff.store.errors import SchemaOutOfDate, SchemaTooNew, StoreError
from signoff.store.sql.tables import VERSION_TABLE

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_LOCK_NAME = "signoff_migrations"
_PG_LOCK_KEY = 0x5169_0FF0  # arbitrary, fixed: "signoff"
_MYSQL_LOCK_TIMEOUT_S = 60


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def _known_revisions() -> set[str]:
    return {
        script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    }


def _current(conn: Connection) -> str | None:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at; ``None`` for an empty schema."""
    async with engine.connect() as conn:
        revision = await conn.run_sync(_current)
        await conn.rollback()
    return revision


async def check_schema(engine: AsyncEngine) -> str:
    """Raise ``SchemaOutOfDate`` (or ``SchemaTooNew``) unless the database is at the head."""
    head = head_revision()
    current = await current_revision(engine)
    if current == head:
        return head
    if current is not None and current not in _known_revisions():
        raise SchemaTooNew(current, head)
    raise SchemaOutOfDate(current, head)


async def upgrade_schema(engine: AsyncEngine) -> tuple[str | None, str]:
    """Apply every missing migration. Returns (revision before, revision after)."""
    head = head_revision()
    current = await current_revision(engine)
    if current == head:
        return current, head
    if current is not None and current not in _known_revisions():
        raise SchemaTooNew(current, head)
    async with engine.connect() as conn:
        try:
            before = await conn.run_sync(_upgrade_locked)
            await conn.commit()
        finally:
            if conn.dialect.name in ("mysql", "mariadb"):
                await conn.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": _LOCK_NAME})
                await conn.commit()
    return before, head


def _upgrade_locked(conn: Connection) -> str | None:
    dialect = conn.dialect.name
    if dialect == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    elif dialect in ("mysql", "mariadb"):
        got = conn.execute(
            sa.text("SELECT GET_LOCK(:name, :timeout)"),
            {"name": _LOCK_NAME, "timeout": _MYSQL_LOCK_TIMEOUT_S},
        ).scalar()
        if got != 1:
            raise StoreError("another process has been migrating this database for over a minute")
    before = _current(conn)  # re-read under the lock: someone may have just finished
    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")
    return before
