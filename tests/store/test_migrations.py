"""Schema migrations: shipped in the package, applied once, required before a server starts."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from signoff.store.errors import SchemaOutOfDate, SchemaTooNew, UnsupportedDatabase
from signoff.store.sql import create_engine, head_revision, open_sql_store, upgrade_database
from signoff.store.sql import engine as engine_module
from signoff.store.sql.migrate import current_revision
from signoff.store.sql.tables import VERSION_TABLE, metadata

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


def _dialect(url: str) -> str:
    return sa.engine.make_url(url).get_backend_name()


async def test_a_fresh_database_is_upgraded_to_the_head_and_a_second_upgrade_does_nothing(
    empty_url: str,
) -> None:
    assert await upgrade_database(empty_url) == (None, head_revision())
    assert await upgrade_database(empty_url) == (head_revision(), head_revision())


async def test_the_tables_the_code_queries_match_what_the_migrations_create(
    empty_url: str,
) -> None:
    await upgrade_database(empty_url)
    engine = create_engine(empty_url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn: Any) -> list[Any]:
                context = MigrationContext.configure(
                    sync_conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
                )
                return list(compare_metadata(context, metadata))

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()


async def test_the_embedded_sqlite_database_upgrades_itself_on_first_start(
    tmp_path: Path,
) -> None:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'first.db'}")
    try:
        assert await current_revision(store.engine) == head_revision()
    finally:
        await store.close()


async def test_a_server_database_with_an_old_schema_refuses_to_start_naming_the_command(
    empty_url: str,
) -> None:
    upgrade = None if _dialect(empty_url) != "sqlite" else False
    with pytest.raises(SchemaOutOfDate) as refused:
        await open_sql_store(empty_url, upgrade=upgrade)
    assert refused.value.code == "DATABASE_SCHEMA_OUT_OF_DATE"
    assert "signoff db upgrade" in str(refused.value)


async def test_a_schema_from_a_newer_signoff_is_refused(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'newer.db'}"
    await upgrade_database(url)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = 'from-future'"))
    finally:
        await engine.dispose()
    for upgrade in (None, True, False):
        with pytest.raises(SchemaTooNew):
            await open_sql_store(url, upgrade=upgrade)


async def test_concurrent_first_starts_migrate_exactly_once(empty_url: str) -> None:
    results = await asyncio.gather(*(upgrade_database(empty_url) for _ in range(8)))
    assert sorted(before or "" for before, _ in results).count("") == 1
    assert {after for _, after in results} == {head_revision()}


async def test_a_first_start_waits_for_the_write_lock_of_a_file_still_in_rollback_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Switching into WAL needs a lock SQLite takes without its busy handler; signoff waits."""
    path = tmp_path / "fresh.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE other_app (x)")  # a file with content, in rollback mode
    holder.execute("BEGIN IMMEDIATE")  # the write lock another first start would hold
    waited = asyncio.Event()
    pause = engine_module._wait_for_wal_lock

    async def watched(seconds: float) -> None:
        waited.set()
        await pause(seconds)

    monkeypatch.setattr(engine_module, "_wait_for_wal_lock", watched)
    opening = asyncio.create_task(upgrade_database(f"sqlite+aiosqlite:///{path}"))
    watching = asyncio.create_task(waited.wait())
    try:
        await asyncio.wait({opening, watching}, timeout=DEADLINE, return_when="FIRST_COMPLETED")
        assert waited.is_set() and not opening.done(), "refused at once instead of waiting"
    finally:
        watching.cancel()
        holder.execute("COMMIT")
        holder.close()
    assert await asyncio.wait_for(opening, DEADLINE) == (None, head_revision())
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        check.close()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite://",
        "sqlite+pysqlite:///x.db",
        "oracle://scott@db/x",
        "not a url",
    ],
)
async def test_urls_this_build_cannot_serve_are_refused(url: str) -> None:
    with pytest.raises(UnsupportedDatabase):
        await open_sql_store(url)


def test_a_url_without_a_driver_gets_the_async_default() -> None:
    from signoff.store.sql.engine import normalize_url

    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("mysql://u@h/db").drivername == "mysql+aiomysql"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite+aiosqlite"


@pytest.mark.slow
def test_the_wheel_ships_the_migrations(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    base = "signoff/store/sql/migrations/"
    assert {base + "env.py", base + "script.py.mako", base + "versions/0001_initial.py"} <= names
