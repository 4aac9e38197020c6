"""``History``: what a replay may read of the store — and nothing it could write with.

A replay receives this port and only this: no ``Store``, no unit of work. The SQL view
(``signoff.store.history``) opens its own connections read-only at the database (SQLite
``query_only``, PostgreSQL and MySQL read-only sessions), so even a bug here cannot write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun


class History(Protocol):
    """The stored runs and their audit trail, read in the trail's order."""

    async def events(
        self, after_seq: int, limit: int, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        """Audit events with ``seq > after_seq``, in ``seq`` order (one tenant's, or all)."""
        ...

    async def runs(self, run_ids: Sequence[str]) -> dict[str, ActionRun]:
        """The stored runs with these ids (a missing or undecodable one is left out)."""
        ...

    async def last_seq(self) -> int:
        """The highest ``seq`` stored (0: no events)."""
        ...

    async def close(self) -> None: ...


async def first_seq_at(history: History, at: datetime) -> int:
    """The ``seq`` to scan after so that the first event read is the first at or after ``at``.

    A binary search on ``seq`` (events are appended in time order; instances' clocks may differ
    a little, which the caller's warm-up absorbs): a few indexed reads, whatever the history's
    length."""
    low, high = 0, await history.last_seq()
    while low < high:
        middle = (low + high) // 2
        found = await history.events(middle, 1)
        if not found:
            high = middle
        elif found[0].at < at:
            assert found[0].seq is not None
            low = max(found[0].seq, middle + 1)
        else:
            high = middle
    return low
