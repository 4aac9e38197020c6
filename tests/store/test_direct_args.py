"""The direct ways build each statement's arguments from a plan worked out once: SQLite's
writer (``direct.py``) and PostgreSQL's hot units (``postgres_direct.py``).

The plan must send exactly what SQLAlchemy's ``construct_params`` would: every statement a
governed run writes is checked against it here, argument by argument, while real work runs
(proposals, duplicates, approvals, limits, cancellation), and a missing required value still
fails with SQLAlchemy's own error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
from signoff.store.sql import SqlStore, direct, open_sql_store, postgres_direct
from signoff.store.sql.tables import runs
from tests.helpers import AGENT, LARGE, SMALL, Recorder, approve, definition, proposal
from tests.store.conftest import Backend

DAY = timedelta(days=1)


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every planned execution also built the SQLAlchemy way, and compared."""
    seen: list[str] = []
    planned = direct._Plan.args

    def args(plan: direct._Plan, params: Mapping[str, Any] | None) -> tuple[Any, ...]:
        fast = planned(plan, params)
        assert fast == plan._constructed(params), plan.sql
        if plan.fields is not None and params:
            seen.append(plan.sql)
        return fast

    monkeypatch.setattr(direct._Plan, "args", args)
    yield seen


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


async def test_planned_arguments_are_what_sqlalchemy_would_send(
    tmp_path: Path, compared: list[str], tenant: str
) -> None:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}", upgrade=True)
    try:
        await governed_work(store, tenant)
    finally:
        await store.close()
    # The fast way was taken for inserts, compare-and-sets, completions and audit rows alike.
    assert len(set(compared)) >= 6, sorted(set(compared))


@pytest.mark.postgres
async def test_postgres_planned_arguments_are_what_sqlalchemy_would_send(
    pg: Backend, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL's direct way (``postgres_direct.py``): each plan's arguments
    against the statement compiled and ``construct_params``-ed by SQLAlchemy for the call."""
    store = await pg.open_sql()
    dialect = store.engine.dialect
    statements: dict[int, Any] = {}
    seen: list[str] = []
    plan_for, planned = postgres_direct.plan_for, postgres_direct.Plan.args

    def remembering(plans: Any, statement: Any, dialect: Any, params: Any) -> Any:
        plan = plan_for(plans, statement, dialect, params)
        if plan is not None:
            statements[id(plan)] = statement
        return plan

    def args(plan: postgres_direct.Plan, params: Mapping[str, Any]) -> list[Any]:
        fast = planned(plan, params)
        compiled: Any = statements[id(plan)].compile(dialect=dialect, column_keys=sorted(params))
        values = compiled.construct_params(params)
        processors = compiled._bind_processors
        expected = [
            processors[name](values[name])
            if name in processors and values[name] is not None
            else values[name]
            for name in compiled.positiontup
        ]
        assert fast == expected, plan.sql
        seen.append(plan.sql)
        return fast

    monkeypatch.setattr(postgres_direct, "plan_for", remembering)
    monkeypatch.setattr(postgres_direct.Plan, "args", args)
    await governed_work(store, tenant)
    assert len(set(seen)) >= 5, sorted(set(seen))


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
    processor = column_type._cached_bind_processor(dialect)
    assert processor is not None
    assert direct._utc_text(at) == processor(at)


def test_a_naive_instant_is_refused_as_the_column_type_refuses_it() -> None:
    with pytest.raises(ValueError, match="naive"):
        direct._utc_text(datetime(2026, 1, 1))
