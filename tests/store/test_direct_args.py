"""The direct ways send statements compiled by SQLAlchemy straight to the driver: SQLite's
writer (``direct.py``) and PostgreSQL's units (``postgres_direct.py``).

What they store must be what SQLAlchemy's own execution stores (read back as the driver reads
it), governed work (proposals, duplicates, approvals, limits, cancellation) must run on them,
and a missing required value still fails with SQLAlchemy's own error.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.dialects import sqlite

from signoff.core.limits import LimitSpec
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.sql import SqlStore, direct, open_sql_store
from signoff.store.sql.codec import run_values
from signoff.store.sql.postgres_unit import PostgresUnit
from signoff.store.sql.tables import runs
from tests.helpers import AGENT, LARGE, SMALL, Recorder, approve, definition, proposal
from tests.store.conftest import Backend
from tests.store.samples import full_run

DAY = timedelta(days=1)


async def governed_work(store: Store, tenant: str) -> None:
    """Proposals, a replay, a reused key, an approval, a limit, a cancellation."""
    limit = LimitSpec(name="refunds", window=DAY, sum="input.amount", max=100_000)
    runtime = Runtime(ActionRegistry([definition(Recorder(), limits=(limit,))]), store)
    done = await runtime.propose(proposal(SMALL, key="k-1", tenant=tenant))
    assert done.code == "SUCCEEDED"
    replayed = await runtime.propose(proposal(SMALL, key="k-1", tenant=tenant))
    assert replayed.duplicate_of == done.run_id
    reused = await runtime.propose(proposal({**SMALL, "amount": 11}, key="k-1", tenant=tenant))
    assert reused.code == "IDEMPOTENCY_KEY_REUSED"
    waiting = await runtime.propose(proposal(LARGE, key="k-2", tenant=tenant))
    assert waiting.code == "APPROVAL_REQUIRED"
    decided = await runtime.decide(waiting.run_id, tenant, approve())
    assert decided.outcome is not None and decided.outcome.code == "SUCCEEDED"
    other = {**LARGE, "invoice_id": "INV-3"}
    parked = await runtime.propose(proposal(other, key="k-3", tenant=tenant))
    cancelled = await runtime.cancel(parked.run_id, tenant, AGENT)
    assert cancelled.code == "ACTION_CANCELLED"


def _row_of(run_id: str) -> tuple[Any, dict[str, Any]]:
    """The stored row of ``run_id`` as the driver reads it back (no type processing)."""
    return sa.text(f"SELECT * FROM {runs.name} WHERE run_id = :id"), {"id": run_id}


def _stored(row: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(row._mapping).items() if k != "run_id"}


async def test_the_writer_stores_what_sqlalchemy_stores(tmp_path: Path, tenant: str) -> None:
    """The same run inserted by the writer's direct way and by SQLAlchemy's own execution,
    then governed work on the direct way: byte for byte the same stored values, and the work's
    runs read back whole."""
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}", upgrade=True)
    assert isinstance(store, SqlStore) and store.writer is not None
    run = full_run(tenant)
    values = run_values(run)
    insert = sa.insert(runs)

    def both(conn: Any) -> tuple[Any, Any]:
        direct.DirectConnection(conn, {}).execute(insert, values | {"run_id": "direct"})
        conn.execute(insert, values | {"run_id": "ordinary"})
        return (
            conn.execute(*_row_of("direct")).one(),
            conn.execute(*_row_of("ordinary")).one(),
        )

    try:
        fast, ordinary = await store.writer.unit_of_one(both)
        assert _stored(fast) == _stored(ordinary)
        assert isinstance(_stored(fast)["created_at"], str)  # stored as SQLite text
        await governed_work(store, tenant)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgres_direct_way_stores_what_sqlalchemy_stores(pg: Backend, tenant: str) -> None:
    """The same on PostgreSQL: a run inserted straight on asyncpg (``postgres_direct.py``) and
    one through SQLAlchemy's execution in the same unit read back equal, and governed work on
    the direct way succeeds."""
    store = await pg.open_sql()
    run = full_run(tenant)
    values = run_values(run)
    insert = sa.insert(runs)
    direct_id, ordinary_id = f"{run.run_id}-d", f"{run.run_id}-o"
    async with store.unit() as unit:
        assert isinstance(unit, PostgresUnit)
        assert await unit.write(insert, values | {"run_id": direct_id}) == 1
        assert unit._plan(insert, values | {"run_id": direct_id}) is not None  # the direct way
        await unit.read(insert, values | {"run_id": ordinary_id}, lambda r: r.rowcount)
        fast = await unit.read(*_row_of(direct_id), lambda r: r.one())
        ordinary = await unit.read(*_row_of(ordinary_id), lambda r: r.one())
    assert _stored(fast) == _stored(ordinary)
    await governed_work(store, tenant)


async def test_a_missing_required_value_fails_as_sqlalchemy_says(tmp_path: Path) -> None:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'e.db'}", upgrade=True)
    assert isinstance(store, SqlStore)
    statement = (
        sa.update(runs)
        .where(runs.c.run_id == sa.bindparam("b_run_id"))
        .values(status=sa.bindparam("b_status", required=True))
    )

    def op(conn: Any) -> None:
        direct.DirectConnection(conn, {}).execute(statement, {"b_run_id": "r-1"})

    try:
        with pytest.raises(exc.InvalidRequestError) as raised:
            assert store.writer is not None
            await store.writer.unit_of_one(op)
        assert "b_status" in str(raised.value)
    finally:
        await store.close()


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 12, 2, 3, 40, 0, 123456, tzinfo=UTC),
        datetime(2026, 12, 2, 3, 40, 0, 0, tzinfo=UTC),
        datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, 0, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=timezone(timedelta(hours=-11))),
    ],
)
def test_an_instant_is_written_as_the_column_type_writes_it(at: datetime) -> None:
    column_type = runs.c.created_at.type
    dialect = sqlite.dialect()
    processor = column_type.dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None
    assert direct._utc_text(at) == processor(at)


def test_a_naive_instant_is_refused_as_the_column_type_refuses_it() -> None:
    with pytest.raises(ValueError, match="naive"):
        direct._utc_text(datetime(2026, 1, 1))
