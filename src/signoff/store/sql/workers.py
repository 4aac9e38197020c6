"""``WorkerRegistry`` over ``signoff_workers``: one heartbeat row per runtime incarnation.

A heartbeat is its own small transaction, outside any unit of work. It overwrites the row (an
upsert is fine here: liveness is a measurement, not lifecycle truth; runs never are upserted).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Insert

from signoff.store.sql.tables import workers


def _upsert(dialect: str) -> Insert:
    if dialect == "postgresql":
        pg = postgresql.insert(workers)
        return pg.on_conflict_do_update(
            index_elements=["worker_id"], set_={"last_seen": pg.excluded.last_seen}
        )
    if dialect == "sqlite":
        lite = sqlite.insert(workers)
        return lite.on_conflict_do_update(
            index_elements=["worker_id"], set_={"last_seen": lite.excluded.last_seen}
        )
    my = mysql.insert(workers)
    return my.on_duplicate_key_update(last_seen=my.inserted.last_seen)


class SqlWorkerRegistry:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._upsert = _upsert(engine.dialect.name)

    async def heartbeat(self, worker_id: str, now: datetime) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(self._upsert, {"worker_id": worker_id, "last_seen": now})

    async def last_seen(self, worker_ids: Sequence[str]) -> dict[str, datetime]:
        wanted = set(worker_ids)
        if not wanted:
            return {}
        query = sa.select(workers.c.worker_id, workers.c.last_seen).where(
            workers.c.worker_id.in_(sorted(wanted))
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            await conn.rollback()
        # Exact matches only (MySQL pads trailing spaces when it compares).
        return {worker_id: seen for worker_id, seen in rows if worker_id in wanted}
