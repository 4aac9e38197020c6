"""``WorkerRegistry`` over ``signoff_workers``: one row per runtime incarnation.

An incarnation's first heartbeat registers it: its host, pid and process start time, and the
lock its own database session holds (``liveness.py``). Later heartbeats refresh ``last_seen`` and
check that the lock's session still answers. A heartbeat is its own small transaction, outside
any unit of work, and overwrites the row (an upsert is fine here: liveness is a measurement, not
lifecycle truth; runs never are upserted).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Insert

from signoff.core.ports import Liveness
from signoff.store.errors import StoreError
from signoff.store.sql.liveness import (
    Incarnation,
    SessionLock,
    acquire,
    lock_name,
    process_liveness,
    session_liveness,
)
from signoff.store.sql.tables import workers
from signoff.store.sql.writer import SqliteWriter

log = logging.getLogger("signoff")
_COLUMNS = ("last_seen", "host", "pid", "started", "lock_name", "revisions")


def _upsert(dialect: str) -> Insert:
    if dialect == "postgresql":
        pg = postgresql.insert(workers)
        return pg.on_conflict_do_update(
            index_elements=["worker_id"], set_={c: pg.excluded[c] for c in _COLUMNS}
        )
    if dialect == "sqlite":
        lite = sqlite.insert(workers)
        return lite.on_conflict_do_update(
            index_elements=["worker_id"], set_={c: lite.excluded[c] for c in _COLUMNS}
        )
    my = mysql.insert(workers)
    return my.on_duplicate_key_update({c: my.inserted[c] for c in _COLUMNS})


class SqlWorkerRegistry:
    def __init__(self, engine: AsyncEngine, writer: SqliteWriter | None = None) -> None:
        self._engine = engine
        # SQLite: a heartbeat is a unit on the store's writer, so it never waits on SQLite's
        # busy handler behind a run of batches (writer.py).
        self._writer = writer
        self._upsert = _upsert(engine.dialect.name)
        self._database = str(engine.url.database or "")
        self._locks: dict[str, SessionLock | None] = {}
        self._registering = asyncio.Lock()
        self._me = Incarnation.this_process()

    async def heartbeat(
        self, worker_id: str, now: datetime, revisions: Mapping[str, str] | None = None
    ) -> None:
        # Shielded: a heartbeat cancelled mid-query (the recovery pulse is cancelled when a pass
        # ends) must not break the lock's connection, which would end the session and the lock.
        lock = await asyncio.shield(self._keep_lock(worker_id))
        row: dict[str, Any] = {
            "worker_id": worker_id,
            "last_seen": now,
            "host": self._me.host,
            "pid": self._me.pid,
            "started": self._me.started,
            "lock_name": lock.name if lock is not None else None,
            "revisions": json.dumps(dict(revisions), sort_keys=True) if revisions else None,
        }
        if self._writer is not None:
            upsert = self._upsert
            try:
                await self._writer.unit_of_one(lambda conn: conn.execute(upsert, row))
            except TimeoutError:
                raise StoreError("database is locked: the heartbeat waited too long") from None
            return
        async with self._engine.begin() as conn:
            await conn.execute(self._upsert, row)

    async def _keep_lock(self, worker_id: str) -> SessionLock | None:
        """Take the incarnation's lock on its first heartbeat; afterwards check it still holds."""
        async with self._registering:
            if worker_id not in self._locks:
                self._locks[worker_id] = await acquire(
                    self._engine, lock_name(worker_id, self._database)
                )
            lock = self._locks[worker_id]
            if lock is not None and not await lock.ping():
                log.error("worker %s: the session holding its liveness lock ended", worker_id)
                await lock.release()
                lock = self._locks[worker_id] = await acquire(self._engine, lock.name)
            return lock

    async def _rows(self, worker_ids: Sequence[str]) -> list[sa.Row[Any]]:
        wanted = set(worker_ids)
        if not wanted:
            return []
        query = sa.select(workers).where(workers.c.worker_id.in_(sorted(wanted)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            await conn.rollback()
        # Exact matches only (MySQL pads trailing spaces when it compares).
        return [row for row in rows if row.worker_id in wanted]

    async def revisions(self, action_id: str, since: datetime) -> dict[str, str]:
        query = sa.select(workers.c.worker_id, workers.c.revisions).where(
            workers.c.last_seen > since, workers.c.revisions.is_not(None)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
            await conn.rollback()
        found: dict[str, str] = {}
        for row in rows:
            try:
                held = json.loads(row.revisions)
            except (TypeError, ValueError):
                continue  # an unreadable row holds nothing this process can rely on
            revision = held.get(action_id) if isinstance(held, dict) else None
            if isinstance(revision, str):
                found[row.worker_id] = revision
        return found

    async def last_seen(self, worker_ids: Sequence[str]) -> dict[str, datetime]:
        return {row.worker_id: row.last_seen for row in await self._rows(worker_ids)}

    async def liveness(self, worker_ids: Sequence[str]) -> dict[str, Liveness]:
        """DEAD if its process on this host is gone or its lock's session ended; else ALIVE if
        either was seen alive; else UNKNOWN (a row from before this was recorded, another host
        with no lock)."""
        rows = await self._rows(worker_ids)
        names = {row.worker_id: row.lock_name for row in rows if row.lock_name}
        sessions = await session_liveness(self._engine, names)
        found: dict[str, Liveness] = {}
        for row in rows:
            views = {
                process_liveness(row.host, row.pid, row.started),
                sessions.get(row.worker_id, Liveness.UNKNOWN),
            }
            if Liveness.DEAD in views:
                found[row.worker_id] = Liveness.DEAD
            elif Liveness.ALIVE in views:
                found[row.worker_id] = Liveness.ALIVE
            else:
                found[row.worker_id] = Liveness.UNKNOWN
        return found

    async def close(self) -> None:
        """Release this process's locks (a clean shutdown)."""
        async with self._registering:
            for lock in self._locks.values():
                if lock is not None:
                    await lock.release()
            self._locks.clear()
