"""PostgreSQL's direct way: a unit cancelled while its transaction's BEGIN is in flight.

asyncpg records the transaction before it sends BEGIN, the adapter only after the answer: a
cancellation in between must not send the connection back to the pool inside a transaction
(the pool does not reset connections), or every later unit on it would be answered "committed"
while nothing is. Cancelled exactly in that window (watching asyncpg's transaction object, no
timers), the next unit's write must really be committed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from signoff.core.chain import GENESIS
from signoff.store.sql.tables import audit_heads
from signoff.store.sql.unit import SqlUnit
from tests.store.conftest import Backend

pytestmark = pytest.mark.postgres


HEAD = sa.insert(audit_heads).values(
    tenant_id=sa.bindparam("b_tenant"), chain_seq=0, head_hash=GENESIS
)


def raw_of(unit: Any) -> Any:
    return unit._conn.sync_connection.connection.driver_connection


async def test_a_unit_cancelled_while_its_begin_is_in_flight_leaves_no_dirty_connection(
    pg: Backend, tenant: str, postgres_url: str
) -> None:
    store = await pg.open_sql(pool_size=1, max_overflow=0)
    landed = 0
    for attempt in range(300):
        async with store.unit() as unit:  # the pool's one connection, as the victim gets it
            assert isinstance(unit, SqlUnit)
            await unit.read(sa.select(sa.literal(1)), None, lambda r: r.scalar_one())
            raw = raw_of(unit)

        async def victim(n: int = attempt) -> None:
            async with store.unit() as unit:
                assert isinstance(unit, SqlUnit)
                await unit.write(HEAD, {"b_tenant": f"{tenant}-victim-{n}"})

        task = asyncio.ensure_future(victim())
        while not task.done():
            xact = raw._top_xact
            if xact is not None:
                if xact._state.name == "NEW":  # BEGIN sent, its answer not yet read
                    task.cancel()
                    landed += 1
                break
            await asyncio.sleep(0)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if landed:
            break
    if not landed:
        pytest.skip("never landed in BEGIN's window")
    async with store.unit() as unit:
        assert isinstance(unit, SqlUnit)
        await unit.write(HEAD, {"b_tenant": f"{tenant}-after"})
        raw = raw_of(unit)
    assert not raw.is_in_transaction()
    engine = create_async_engine(postgres_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.select(audit_heads.c.tenant_id).where(
                    audit_heads.c.tenant_id == f"{tenant}-after"
                )
            )
            assert rows.all() != [], "the next unit's write, answered as committed, is not there"
    finally:
        await engine.dispose()
