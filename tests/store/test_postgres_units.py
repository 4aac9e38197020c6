"""PostgreSQL units: statements sent straight to asyncpg, and the one-statement hot units.

``postgres_direct.py`` runs a unit in asyncpg's own transaction on the driver connection, its
plain writes straight on asyncpg and SQLAlchemy's statements inside the same transaction;
``postgres_heads.py`` lets settle and create-reserved be one statement each
after the chain head this store last committed. These tests pin what that must not change:
the exceptions a failing statement raises, atomicity with ordinary statements in one unit, and
a linear, verifiable chain when the assumed head has moved (another store, as another process
would) - plus the round trips a governed call costs now.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, IntegrityError

from signoff.core.chain import GENESIS, recomputed_hash
from signoff.core.clock import ManualClock
from signoff.core.codes import ExecutionStatus
from signoff.core.ledger import RunLedger
from signoff.core.ports import (
    AuditEvent,
    ChainHead,
    Settlement,
    SettlingUnit,
)
from signoff.core.registry import ActionRegistry
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun, RunStatus
from signoff.core.runtime import Runtime
from signoff.store.sql import SqlStore
from signoff.store.sql.postgres_heads import ChainHeads
from signoff.store.sql.postgres_unit import PostgresUnit
from signoff.store.sql.tables import audit_heads, duplicates
from tests.helpers import NO_APPROVAL, SMALL, Recorder, definition, proposal, socket_writes
from tests.store.conftest import Backend
from tests.store.samples import T0, new_run, result, scope
from tests.store.test_whole_units import FixedClock, proposed

pytestmark = pytest.mark.postgres


class Statements:
    """What SQLAlchemy itself executed on a store's engine."""

    def __init__(self, store: SqlStore) -> None:
        self.seen: list[str] = []
        event.listen(store.engine.sync_engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen.append(statement)


async def chain(store: SqlStore, tenant: str) -> list[AuditEvent]:
    async with store.unit() as unit:
        return await unit.audit.scan(tenant_id=tenant)


def assert_linear(trail: list[AuditEvent]) -> None:
    assert [e.chain_seq for e in trail] == list(range(1, len(trail) + 1))
    prev = GENESIS
    for e in trail:
        assert e.prev_hash == prev and recomputed_hash(e) == e.hash
        prev = e.hash or ""


def running(tenant: str) -> ActionRun:
    return new_run(tenant).model_copy(update={"status": RunStatus.RUNNING})


def done(run: ActionRun) -> ActionRun:
    return run.advance(RunStatus.SUCCEEDED, T0 + timedelta(seconds=1), result=result())


def settle_once(kind: str) -> Settlement:
    def events(stored: ActionRun) -> list[AuditEvent]:
        return [AuditEvent(run_id=stored.run_id, tenant_id=stored.tenant_id, kind=kind, at=T0)]

    return Settlement(at=T0, events=events)


async def settled(store: SqlStore, run: ActionRun, final: ActionRun, kind: str) -> Any:
    async with store.unit() as unit:
        assert isinstance(unit, SettlingUnit)
        return await unit.settle(run.version, final, settle_once(kind))


# ------------------------------------------------------------------------ the direct way
async def test_a_unique_violation_on_the_direct_way_is_sqlalchemys_integrity_error(
    pg: Backend, tenant: str
) -> None:
    """Sent straight to asyncpg (SQLAlchemy never executes it), a duplicate key still raises
    ``IntegrityError`` with the server's code, and the unit rolls back what it wrote before."""
    store = await pg.open_sql()
    seen = Statements(store)
    head = sa.insert(audit_heads).values(
        tenant_id=sa.bindparam("b_tenant"), chain_seq=0, head_hash=GENESIS
    )
    with pytest.raises(IntegrityError) as raised:
        async with store.unit() as unit:
            assert isinstance(unit, PostgresUnit)
            await unit.write(head, {"b_tenant": f"{tenant}-kept-out"})
            await unit.write(head, {"b_tenant": tenant})
            await unit.write(head, {"b_tenant": tenant})
    assert getattr(raised.value.orig, "pgcode", None) == "23505"
    assert seen.seen == []  # none of them went through SQLAlchemy's execution
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            sa.select(audit_heads.c.tenant_id).where(audit_heads.c.tenant_id.startswith(tenant))
        )
        assert rows.all() == []


async def test_direct_and_ordinary_statements_share_the_units_transaction(
    pg: Backend, tenant: str
) -> None:
    """A direct write is seen by an ordinary read (datetimes: SQLAlchemy's way) in the same
    unit, and both roll back together."""
    store = await pg.open_sql()
    held = scope(tenant)
    with pytest.raises(ZeroDivisionError):
        async with store.unit() as unit:
            assert (await unit.duplicates.reserve(held, "run-1", "h", T0)).accepted
            entry = await unit.duplicates.get(held)  # ordinary: decodes datetimes
            assert entry is not None and entry.owner_run_id == "run-1"
            _ = 1 / 0
    async with store.engine.connect() as conn:
        count = await conn.execute(
            sa.select(sa.func.count()).where(duplicates.c.tenant_id == tenant)
        )
        assert count.scalar_one() == 0


async def test_a_governed_call_costs_six_round_trips(pg: Backend, tenant: str) -> None:
    """BEGIN, one statement, COMMIT per unit, once the tenant's head is known and the
    statements are prepared on the connection (it was eight: two statements per unit)."""
    store = await pg.open_sql()
    runtime = Runtime(
        ActionRegistry([definition(Recorder(), approval=NO_APPROVAL)]), store, clock=ManualClock()
    )
    for key in ("learns-the-head", "prepares-the-statements"):  # asyncpg prepares once
        warm = await runtime.propose(proposal(SMALL, tenant=tenant, key=key))
        assert warm.status is ExecutionStatus.SUCCEEDED
    with socket_writes() as writes:
        outcome = await runtime.propose(proposal(SMALL, tenant=tenant, key="measured"))
    assert outcome.status is ExecutionStatus.SUCCEEDED
    assert writes.count == 6
    assert_linear(await chain(store, tenant))


# ------------------------------------------------------------------ the assumed chain head
async def test_a_head_moved_by_another_store_is_found_and_the_chain_stays_linear(
    pg: Backend, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores on one database (as two processes): each assumes the head it last
    committed; when the other moved it, the unit appends after the real head instead."""
    misses: list[str] = []
    moved = ChainHeads.moved

    def counted(self: ChainHeads, tenant_id: str) -> None:
        misses.append(tenant_id)
        moved(self, tenant_id)

    monkeypatch.setattr(ChainHeads, "moved", counted)
    a, b = await pg.open_sql(), await pg.open_sql()
    ledger_a, ledger_b = RunLedger(a, FixedClock()), RunLedger(b, FixedClock())
    runs = [running(tenant) for _ in range(6)]
    for n, run in enumerate(runs):
        ledger = ledger_a if n % 2 == 0 else ledger_b
        await ledger.create(run, proposed(run), scope=scope(tenant), on_duplicate=None)
    for n, run in enumerate(runs):
        store = b if n % 2 == 0 else a
        final = done(run)
        assert await settled(store, run, final, f"settled-{n}") is not None
    trail = await chain(a, tenant)
    assert len(trail) == 6 * 3 + 6
    assert_linear(trail)
    assert misses  # the other store's writes were found, not trusted away


async def test_a_unit_that_fails_after_a_one_statement_settle_rolls_it_back(
    pg: Backend, tenant: str
) -> None:
    store = await pg.open_sql()
    ledger = RunLedger(store, FixedClock())
    run = running(tenant)
    await ledger.create(run, proposed(run), scope=scope(tenant), on_duplicate=None)
    final = done(run)
    with pytest.raises(ZeroDivisionError):
        async with store.unit() as unit:
            assert isinstance(unit, SettlingUnit)
            assert await unit.settle(run.version, final, settle_once("undone")) is not None
            _ = 1 / 0
    async with store.unit() as unit:
        assert await unit.runs.get(run.run_id) == run
    assert [e.kind for e in await chain(store, tenant)] == ["proposed", "validated", "dispatching"]
    assert await settled(store, run, final, "done") is not None
    trail = await chain(store, tenant)
    assert [e.kind for e in trail][-1] == "done"
    assert_linear(trail)


async def test_concurrent_units_of_one_tenant_take_turns_and_keep_one_chain(
    pg: Backend, tenant: str
) -> None:
    store = await pg.open_sql()
    ledger = RunLedger(store, FixedClock())
    runs = [running(tenant) for _ in range(12)]
    await asyncio.gather(
        *(ledger.create(r, proposed(r), scope=scope(tenant), on_duplicate=None) for r in runs)
    )
    finals = [done(r) for r in runs]
    outcomes = await asyncio.gather(
        *(settled(store, r, f, f"s-{n}") for n, (r, f) in enumerate(zip(runs, finals, strict=True)))
    )
    assert all(o is not None for o in outcomes)
    trail = await chain(store, tenant)
    assert len(trail) == 12 * 4
    assert_linear(trail)


# ------------------------------------------------------------------------------- turns
async def test_a_cancelled_wait_for_a_turn_leaves_no_turn_behind() -> None:
    heads = ChainHeads()
    await heads.turn("t")
    waiting = asyncio.ensure_future(heads.turn("t"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    heads.release("t")
    assert heads.try_turn("t")  # free again: the cancelled waiter took nothing
    heads.release("t")


async def test_a_turn_handed_to_a_waiter_cancelled_at_that_moment_is_passed_on() -> None:
    heads = ChainHeads()
    await heads.turn("t")
    first = asyncio.ensure_future(heads.turn("t"))
    second = asyncio.ensure_future(heads.turn("t"))
    await asyncio.sleep(0)
    heads.release("t")  # handed to ``first``...
    first.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await second  # the turn went on to the next waiter
    heads.release("t")
    assert heads.try_turn("t")


def test_a_moved_head_is_forgotten_and_the_cache_skipped_for_a_while() -> None:
    heads = ChainHeads()
    heads.committed(ChainHead("t", 5, "h5"))
    heads.committed(ChainHead("t", 4, "h4"))  # recorded late: never goes back
    assert heads.get("t") == ChainHead("t", 5, "h5")
    heads.moved("t")  # first miss: forgotten, skipped for the next unit
    heads.committed(ChainHead("t", 9, "h9"))
    assert heads.get("t") is None
    assert heads.get("t") == ChainHead("t", 9, "h9")
    heads.moved("t")  # second miss in a row: skipped for the next three
    heads.committed(ChainHead("t", 12, "h12"))
    assert [heads.get("t") for _ in range(4)] == [None, None, None, ChainHead("t", 12, "h12")]
    heads.hit("t")
    heads.moved("t")  # a hit in between: back to one
    heads.committed(ChainHead("t", 13, "h13"))
    assert [heads.get("t") for _ in range(2)] == [None, ChainHead("t", 13, "h13")]


async def test_a_connection_lost_on_the_direct_way_is_invalidated_and_the_store_goes_on(
    pg: Backend, tenant: str
) -> None:
    """The server ends the unit's session between two writes: the next write raises
    SQLAlchemy's ``DBAPIError`` saying the connection was invalidated, nothing is committed, and
    the pool hands out a working connection to the next unit."""
    store = await pg.open_sql()
    head = sa.insert(audit_heads).values(
        tenant_id=sa.bindparam("b_tenant"), chain_seq=0, head_hash=GENESIS
    )
    with pytest.raises(DBAPIError) as raised:
        async with store.unit() as unit:
            assert isinstance(unit, PostgresUnit)
            await unit.write(head, {"b_tenant": tenant})
            pid = await unit.read(sa.select(sa.func.pg_backend_pid()), None, _scalar)
            async with store.engine.connect() as admin:
                await admin.execute(sa.select(sa.func.pg_terminate_backend(pid)))
                await admin.commit()
            await unit.write(head, {"b_tenant": f"{tenant}-after"})
    assert raised.value.connection_invalidated
    async with store.unit() as unit:
        assert isinstance(unit, PostgresUnit)
        await unit.write(head, {"b_tenant": f"{tenant}-next"})
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            sa.select(audit_heads.c.tenant_id).where(audit_heads.c.tenant_id.startswith(tenant))
        )
        assert [r.tenant_id for r in rows] == [f"{tenant}-next"]


def _scalar(result: Any) -> Any:
    return result.scalar_one()


@pytest.mark.slow
async def test_two_processes_writing_one_tenant_keep_one_linear_chain(
    pg: Backend, tenant: str, tmp_path: Path
) -> None:
    """Two OS processes govern calls of one tenant at the same moments, each assuming the head
    it last committed: every call succeeds, and the tenant's chain is one linear, verifiable
    chain with every event of both."""
    from tests.store.test_cross_process import Worker

    url = pg.url
    assert url is not None
    workers = [await Worker.start(url, tmp_path / "effects.txt", tenant) for _ in range(2)]
    rounds = 12
    try:
        assert [await w.line() for w in workers] == ["ready", "ready"]
        for round_ in range(rounds):
            for n, w in enumerate(workers):
                w.send(f"go worker-{n}-{round_}")
            for w in workers:
                outcome = ActionOutcome.model_validate_json(await w.line())
                assert outcome.status is ExecutionStatus.SUCCEEDED and outcome.duplicate_of is None
    finally:
        for w in workers:
            await w.stop()
    assert [w.process.returncode for w in workers] == [0, 0]
    trail = await chain(await pg.open_sql(), tenant)
    assert len({e.run_id for e in trail}) == 2 * rounds
    assert_linear(trail)
