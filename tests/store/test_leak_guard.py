"""The guard that fails a test leaving SQLite connections open (tests/leaks.py) sees them."""

from __future__ import annotations

from pathlib import Path

from signoff.store.sql import open_sql_store
from tests.leaks import leaked_since, open_connections


async def test_a_store_left_open_is_reported_with_where_it_was_opened_until_it_is_closed(
    tmp_path: Path,
) -> None:
    before = open_connections()
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'leak.db'}")
    try:
        async with store.unit() as unit:  # takes a pooled connection, returns it open
            await unit.runs.get("nothing")
        leaked = leaked_since(before)
        assert leaked and "test_leak_guard.py" in leaked[0]
    finally:
        await store.close()
    assert leaked_since(before) == []
