"""A recorded history on each store (memory, SQLite, PostgreSQL), replayed through ``History``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.replay import History, ReplayReport, ReplayScope, replay
from signoff.store.history import MemoryHistory, open_history
from signoff.store.memory import InMemoryStore
from signoff.store.sql import open_sql_store
from tests.replay import history as recorded
from tests.store.conftest import postgres_url  # noqa: F401 - a fixture, found by name


@dataclass
class Recorded:
    """A history as stored, and a way to replay it against a manifest text."""

    history: recorded.History
    store: Store
    url: str | None
    tmp_path: Path

    async def reader(self) -> History:
        if self.url is None:
            assert isinstance(self.store, InMemoryStore)
            return MemoryHistory(self.store)
        return await open_history(self.url)

    async def replay(
        self, text: str = recorded.BASE, scope: ReplayScope | None = None, **options: object
    ) -> ReplayReport:
        directory = self.tmp_path / f"manifests-{uuid.uuid4().hex[:6]}"
        registry = recorded.registry(recorded.manifests(directory, text))
        reader = await self.reader()
        try:
            return await replay(
                reader,
                registry,
                scope or ReplayScope(tenant_id=self.history.tenant),
                ReplayReport(**options),  # type: ignore[arg-type]
            )
        finally:
            await reader.close()


Replay = Callable[..., Awaitable[ReplayReport]]


async def _recorded(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Recorded:
    url: str | None = None
    store: Store
    if kind == "memory":
        store = InMemoryStore()
    else:
        if kind == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp_path / 'history.db'}"
        else:
            url = request.getfixturevalue("postgres_url")
        store = await open_sql_store(url)
    registry: ActionRegistry = recorded.registry(recorded.manifests(tmp_path / "ran-under"))
    try:
        history = await recorded.build(store, registry, f"t-{uuid.uuid4().hex[:12]}")
    except BaseException:
        await store.close()
        raise
    return Recorded(history, store, url, tmp_path)


POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


@pytest.fixture(params=["memory", "sqlite", POSTGRES])
async def stored(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Recorded]:
    """The history on each store."""
    found = await _recorded(request.param, request, tmp_path)
    try:
        yield found
    finally:
        await found.store.close()


@pytest.fixture(params=["sqlite", POSTGRES])
async def stored_sql(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Recorded]:
    """The history on each SQL store (which has tables to compare and connections to refuse)."""
    found = await _recorded(request.param, request, tmp_path)
    try:
        yield found
    finally:
        await found.store.close()
