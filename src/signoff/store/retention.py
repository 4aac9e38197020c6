"""How long completed duplicate results are kept for replay, and the sweep that enforces it."""

from __future__ import annotations

from datetime import datetime, timedelta

from signoff.core.ports import Store

DEFAULT_DUPLICATE_RETENTION = timedelta(hours=24)


async def purge_duplicates(
    store: Store, now: datetime, retention: timedelta = DEFAULT_DUPLICATE_RETENTION
) -> int:
    """Forget COMPLETED duplicate entries finished more than ``retention`` ago.

    After that a request with the same key runs again instead of replaying the kept result.
    RUNNING entries are never purged, whatever their age. Returns how many were deleted.
    """
    async with store.unit() as unit:
        return await unit.duplicates.purge_completed(now - retention)
