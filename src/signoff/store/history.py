"""Read-only views of stored history for ``signoff.core.replay`` (its ``History`` port).

``open_history(url)`` opens a database read-only (``store/sql/history.py``); it never builds a
store that could write. ``MemoryHistory`` reads an in-memory store's runs and trail (tests, and
a server running on memory).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from signoff.core.ports import AuditEvent, Store
from signoff.core.replay import History
from signoff.core.run import ActionRun
from signoff.store.memory import InMemoryStore


class MemoryHistory:
    """An in-memory store's history, read through its read methods only."""

    def __init__(self, store: InMemoryStore) -> None:
        self._audit = store.audit
        self._runs = store.runs

    async def events(
        self, after_seq: int, limit: int, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        return await self._audit.scan(after_seq, limit, tenant_id)

    async def runs(self, run_ids: Sequence[str]) -> dict[str, ActionRun]:
        found = {run_id: self._runs.peek(run_id) for run_id in run_ids}
        return {run_id: run for run_id, run in found.items() if run is not None}

    async def last_seq(self) -> int:
        last = await self._audit.scan(0, 1 << 62)
        return last[-1].seq or 0 if last else 0

    async def close(self) -> None:
        return None


async def open_history(url: str) -> History:
    """The history at ``url``, read-only (a SQL URL; ``memory://`` has none to read)."""
    from signoff.store.factory import MEMORY_URL

    if url == MEMORY_URL:
        return MemoryHistory(InMemoryStore())
    from signoff.store.sql.history import SqlHistory

    return await SqlHistory.open(url)


def history_of(store: Store) -> Callable[[], Awaitable[History]] | None:
    """A way to open ``store``'s own history read-only, each time a replay needs it (the
    server's ``POST /api/policy/replay``): the in-memory store's, or new read-only connections
    to the SQL store's database; ``None`` for any other store (the endpoint is then not
    served)."""
    if isinstance(store, InMemoryStore):

        async def memory() -> History:
            return MemoryHistory(store)

        return memory
    from signoff.store.sql import SqlStore

    if not isinstance(store, SqlStore):
        return None
    url = store.engine.url

    async def sql() -> History:
        from signoff.store.sql.history import SqlHistory

        return await SqlHistory.open(url)

    return sql
