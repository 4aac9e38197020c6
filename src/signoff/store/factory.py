"""Open a ``Store`` from a database URL (``memory://`` or any SQLAlchemy async URL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signoff.core.ports import Store

MEMORY_URL = "memory://"
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///signoff.db"


async def open_store(url: str, *, upgrade: bool | None = None) -> Store:
    """``upgrade``: apply migrations on open (default: only for the embedded SQLite)."""
    if url == MEMORY_URL:
        from signoff.store.memory import InMemoryStore

        return InMemoryStore()
    from signoff.store.sql import open_sql_store

    return await open_sql_store(url, upgrade=upgrade)
