"""``SqlHistory``: the replay's ``History`` over its own read-only connections.

It never builds a ``SqlStore`` (no writer, no unit of work): its engine's connections are
read-only *at the database*, so nothing through them can write —

- SQLite: opened ``mode=ro`` (the file is never created or written) with ``PRAGMA query_only``;
- PostgreSQL: ``default_transaction_read_only`` for the session;
- MySQL/MariaDB: ``SET SESSION TRANSACTION READ ONLY`` on connect.

Each read is its own short transaction (a page of events, a batch of runs), so a replay of a
long history never holds a snapshot open on a live server.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun
from signoff.extras import require
from signoff.store.errors import StoreUnavailable
from signoff.store.sql.codec import audit_from_row, run_from_data
from signoff.store.sql.engine import SQLITE_BUSY_TIMEOUT_MS, normalize_url
from signoff.store.sql.migrate import check_schema
from signoff.store.sql.tables import audit_events, runs

_EXTRA = {"asyncpg": "postgres", "aiomysql": "mysql"}


def read_only_engine(url: str | URL) -> AsyncEngine:
    """An engine whose every connection the database itself keeps from writing."""
    parsed = normalize_url(url)
    backend = parsed.get_backend_name()
    extra = _EXTRA.get(parsed.get_driver_name())
    if extra is not None:
        require(extra, f"a {backend} database (--database / SIGNOFF_DATABASE_URL)")
    options: dict[str, Any] = {"pool_size": 2, "max_overflow": 0}
    if backend == "sqlite":
        assert parsed.database is not None
        path = Path(parsed.database).resolve().as_posix()
        ro = parsed.set(
            database=f"file:{path}", query={**parsed.query, "mode": "ro", "uri": "true"}
        )
        engine = create_async_engine(ro, **options)
        event.listen(engine.sync_engine, "connect", _query_only)
        return engine
    if backend == "postgresql":
        options["connect_args"] = {"server_settings": {"default_transaction_read_only": "on"}}
    else:
        options["connect_args"] = {"init_command": "SET SESSION TRANSACTION READ ONLY"}
        options["isolation_level"] = "READ COMMITTED"
    return create_async_engine(parsed, **options)


def _query_only(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA query_only = ON")
    finally:
        cursor.close()


class SqlHistory:
    """Pages of audit events and batches of runs, each read in its own transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.undecodable = 0

    @classmethod
    async def open(cls, url: str | URL) -> SqlHistory:
        engine = read_only_engine(url)
        try:
            await check_schema(engine)
        except (OSError, sqlalchemy.exc.DBAPIError) as exc:
            await engine.dispose()
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            safe = engine.url.render_as_string(hide_password=True)
            raise StoreUnavailable(f"cannot read {safe}: {reason}") from exc
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine)

    async def events(
        self, after_seq: int, limit: int, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        query = sa.select(audit_events).where(audit_events.c.seq > after_seq)
        if tenant_id is not None:
            query = query.where(audit_events.c.tenant_id == tenant_id)
        query = query.order_by(audit_events.c.seq).limit(max(limit, 0))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        found: list[AuditEvent] = []
        for row in rows:
            if tenant_id is not None and row["tenant_id"] != tenant_id:
                continue  # MySQL compares with trailing-space padding
            try:
                found.append(audit_from_row(row))
            except ValueError:  # the event's data does not decode: its kind and status still do
                self.undecodable += 1
                found.append(audit_from_row({**row, "data": None}))
        return found

    async def runs(self, run_ids: Sequence[str]) -> dict[str, ActionRun]:
        wanted = sorted(set(run_ids))
        if not wanted:
            return {}
        query = sa.select(runs.c.run_id, runs.c.data).where(runs.c.run_id.in_(wanted))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        found: dict[str, ActionRun] = {}
        for run_id, data in rows:
            try:
                run = run_from_data(data)
            except ValueError:
                self.undecodable += 1
                continue
            if run.run_id == run_id:
                found[run_id] = run
        return found

    async def last_seq(self) -> int:
        async with self._engine.connect() as conn:
            value = (await conn.execute(sa.select(sa.func.max(audit_events.c.seq)))).scalar()
        return int(value) if value is not None else 0

    async def close(self) -> None:
        await self._engine.dispose()
