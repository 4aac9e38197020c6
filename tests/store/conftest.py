"""Backends for the store contract suite: memory, SQLite (a temporary file), PostgreSQL, MariaDB.

PostgreSQL and MySQL/MariaDB tests read ``SIGNOFF_TEST_POSTGRES_URL`` / ``SIGNOFF_TEST_MYSQL_URL``.
Unset: the tests skip and say why. Set but unreachable: they fail. Each test session creates its
own scratch database on the server (``signoff_test_<pid>_<random>``), migrates it, and drops it
at the end, so sessions sharing a server never see each other's rows or drop each other's
objects. Inside a session, tests keep apart by unique tenant ids and keys.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from signoff.core.ports import Store
from signoff.store.memory import InMemoryStore
from signoff.store.sql import SqlStore, open_sql_store, upgrade_database

T = TypeVar("T")
POSTGRES_ENV = "SIGNOFF_TEST_POSTGRES_URL"
MYSQL_ENV = "SIGNOFF_TEST_MYSQL_URL"


def run_isolated(work: Callable[[], Awaitable[T]]) -> T:
    """Run async set-up work on a private event loop in a worker thread (outside pytest's loop)."""

    async def main() -> T:
        return await work()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def server_url(env: str, label: str) -> str:
    """The server URL from ``env``, or skip saying why."""
    base = os.environ.get(env)
    if not base:
        pytest.skip(f"{env} is not set: {label} tests skipped")
    return base


@contextmanager
def scratch_database(env: str, label: str, *, migrate: bool) -> Iterator[str]:
    """A database of our own on the server named by ``env``, dropped afterwards."""
    admin_url = make_url(server_url(env, label))
    name = f"signoff_test_{os.getpid()}_{secrets.token_hex(4)}"

    async def admin(statement: str) -> None:
        engine = create_async_engine(admin_url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    try:
        run_isolated(lambda: admin(f"CREATE DATABASE {name}"))
    except Exception as exc:
        pytest.fail(f"{env} is set but {label} is unusable: {type(exc).__name__}: {exc}")
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    try:
        if migrate:
            run_isolated(lambda: upgrade_database(url))
        yield url
    finally:
        force = " WITH (FORCE)" if admin_url.get_backend_name() == "postgresql" else ""
        run_isolated(lambda: admin(f"DROP DATABASE {name}{force}"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True) as url:
        yield url


@pytest.fixture(scope="session")
def mysql_url() -> Iterator[str]:
    with scratch_database(MYSQL_ENV, "MySQL/MariaDB", migrate=True) as url:
        yield url


@dataclass
class Backend:
    """Opens stores on one database. Memory: every ``open`` returns the same store."""

    name: str
    url: str | None
    opened: list[Store] = field(default_factory=list)
    _memory: InMemoryStore | None = None

    @property
    def durable(self) -> bool:
        return self.url is not None

    async def open(self, **options: Any) -> Store:
        if self.url is None:
            if self._memory is None:
                self._memory = InMemoryStore()
            return self._memory
        store = await open_sql_store(self.url, **options)
        self.opened.append(store)
        return store

    async def open_sql(self, **options: Any) -> SqlStore:
        store = await self.open(**options)
        assert isinstance(store, SqlStore)
        return store

    async def close_all(self) -> None:
        for store in self.opened:
            await store.close()
        self.opened.clear()


ALL = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]
SQL = ALL[1:]


def _url_for(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    if name == "memory":
        return None
    if name == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    url: str = request.getfixturevalue("postgres_url" if name == "postgres" else "mysql_url")
    return url


@pytest.fixture(params=ALL)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Every store implementation, memory included."""
    result = Backend(request.param, _url_for(request.param, request, tmp_path))
    try:
        yield result
    finally:
        await result.close_all()


@pytest.fixture(params=SQL)
async def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The durable stores only (restarts, rollbacks, several processes)."""
    result = Backend(request.param, _url_for(request.param, request, tmp_path))
    try:
        yield result
    finally:
        await result.close_all()


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[Backend]:
    """PostgreSQL alone (its own units: the direct way, the assumed chain head)."""
    backend = Backend("postgres", postgres_url)
    try:
        yield backend
    finally:
        await backend.close_all()


@pytest.fixture
def tenant() -> str:
    """A tenant id no other test uses, so tests can share a database."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=SQL)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema yet, of each SQL dialect."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    elif request.param == "postgres":
        with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=False) as url:
            yield url
    else:
        with scratch_database(MYSQL_ENV, "MySQL/MariaDB", migrate=False) as url:
            yield url
