"""PostgreSQL: the ledger's two hot units in two statements each (plus BEGIN and COMMIT).

**Settle** ("compare-and-set; if it won, complete, release and audit", ``SettlingUnit``):
``RunLedger.terminal`` (every governed call's second unit) hands the store a ``Settlement``; on
PostgreSQL it is sent as

1. one data-modifying CTE: the compare-and-set, and - each only if it matched a row - the
   reservation's completion, the release of the run's limit reservations and the lock of the
   tenant's chain head (``ON CONFLICT DO UPDATE`` of the head row, which returns it);
2. the chained audit rows inserted by a CTE of the head's update (``audit.append_at_head``).

instead of one statement each (CAS, complete, release, bump, append). Lock order is unchanged:
the run row first (the head's insert selects from the CAS, so it runs after it), the head last.
Nothing is written when the compare-and-set is lost, exactly as with the four calls.

**Create reserved** ("reserve the scope; if that won, create the run with its audit",
``ReservingUnit``), every governed call's first unit:

1. the reservation's ``INSERT ... ON CONFLICT DO NOTHING`` with, only if it inserted, the lock of
   the tenant's chain head (selected from the insert, so it runs after it);
2. the run row and the chained audit rows, inserted by CTEs of the head's update, which also
   answers whether the run id was free.

When the scope is taken, statement 1 has written nothing and the ordinary ``reserve`` reads the
holder (and retries, as it always does). Lock order is the ordinary one: the reservation, then
the head.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.selectable import Select

from signoff.core.chain import GENESIS
from signoff.core.ports import (
    AuditEvent,
    ChainHead,
    DuplicateState,
    Reservation,
    RunAlreadyExists,
    Settlement,
)
from signoff.core.run import ActionRun, DuplicateScope
from signoff.store.sql.audit import append_at_head
from signoff.store.sql.codec import duplicate_values, result_json, run_values, scope_hash
from signoff.store.sql.statements import TERMINAL_LITERALS
from signoff.store.sql.tables import audit_heads, duplicates, limit_reservations, runs
from signoff.store.sql import postgres_direct as direct
from signoff.store.sql.unit import Extract, Params, SqlUnit, rowcount


def _settle_statement() -> Select[Any]:
    run_id = sa.bindparam("b_run_id", type_=runs.c.run_id.type)
    expected = sa.bindparam("b_expected", type_=sa.Integer())
    cas = (
        sa.update(runs)
        .where(
            runs.c.run_id == run_id,
            runs.c.version == expected,
            runs.c.status.not_in(TERMINAL_LITERALS),
        )
        .values(
            status=sa.bindparam("b_status"),
            version=expected + 1,
            updated_at=sa.bindparam("b_updated_at", type_=runs.c.updated_at.type),
            data=sa.bindparam("b_data"),
        )
        .returning(runs.c.tenant_id)
        .cte("signoff_cas")
    )
    won = sa.exists(sa.select(cas.c.tenant_id))
    completed = (
        sa.update(duplicates)
        .where(
            duplicates.c.scope_hash == sa.bindparam("b_scope_hash"),
            duplicates.c.owner_run_id == run_id,
            duplicates.c.state == DuplicateState.RUNNING.value,
            won,
        )
        .values(
            state=DuplicateState.COMPLETED.value,
            result=sa.bindparam("b_result"),
            completed_at=sa.bindparam("b_completed_at", type_=duplicates.c.completed_at.type),
        )
        .cte("signoff_completed")
    )
    released = (
        sa.delete(limit_reservations)
        .where(
            limit_reservations.c.run_id == run_id,
            sa.bindparam("b_release", type_=sa.Boolean()),
            won,
        )
        .cte("signoff_released")
    )
    lock = postgresql.insert(audit_heads).from_select(
        ["tenant_id", "chain_seq", "head_hash"],
        sa.select(cas.c.tenant_id, sa.literal(0, sa.BigInteger()), sa.literal(GENESIS)),
    )
    head = (
        lock.on_conflict_do_update(
            index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
        )
        .returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)
        .cte("signoff_head")
    )
    return sa.select(head.c.chain_seq, head.c.head_hash).add_cte(completed, released)


_SETTLE = _settle_statement()


def _reserve_statement() -> Select[Any]:
    reserved = (
        postgresql.insert(duplicates)
        .values({c.name: sa.bindparam(f"d_{c.name}", type_=c.type) for c in duplicates.columns})
        .on_conflict_do_nothing(index_elements=["scope_hash"])
        .returning(duplicates.c.scope_hash)
        .cte("signoff_reserved")
    )
    lock = postgresql.insert(audit_heads).from_select(
        ["tenant_id", "chain_seq", "head_hash"],
        sa.select(
            sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
            sa.literal(0, sa.BigInteger()),
            sa.literal(GENESIS),
        ).select_from(reserved),
    )
    head = (
        lock.on_conflict_do_update(
            index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
        )
        .returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)
        .cte("signoff_head")
    )
    return sa.select(head.c.chain_seq, head.c.head_hash)


_RESERVE = _reserve_statement()


class PostgresUnit(SqlUnit):
    """A PostgreSQL unit of work that also settles in two statements (``SettlingUnit``).

    Statements whose answer needs no result processing run straight on asyncpg
    (``postgres_direct.py``), in the transaction SQLAlchemy tracks for the connection."""

    __slots__ = ()

    async def read(self, statement: Executable, params: Params | None, extract: Extract) -> Any:
        plan = self._plan(statement, params if params is not None else {})
        if plan is None:
            return await super().read(statement, params, extract)
        conn = self._conn or await self._connect()
        return extract(await direct.execute(conn, plan, params or {}))

    async def write(
        self, statement: Executable, params: Params, extract: Extract = rowcount
    ) -> Any:
        plan = self._plan(statement, params)
        if plan is None:
            return await super().write(statement, params, extract)
        assert isinstance(params, Mapping)
        self.wrote = True
        conn = self._conn or await self._connect()
        return extract(await direct.execute(conn, plan, params))

    def _plan(self, statement: Executable, params: Params) -> direct.Plan | None:
        if not isinstance(params, Mapping):
            return None  # executemany: SQLAlchemy's way
        return direct.plan_for(statement, self._engine.dialect, params)

    async def finish(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await _end(conn, commit=self.wrote)

    async def abort(self) -> None:
        conn, self._conn = self._conn, None
        self.changed_runs.clear()
        if conn is not None:
            await _end(conn, commit=False)

    async def settle(
        self, expected_version: int, run: ActionRun, then: Settlement
    ) -> ActionRun | None:
        stored = run.model_copy(update={"version": expected_version + 1})
        scope, result = then.complete if then.complete is not None else (None, None)
        row = await self.write(
            _SETTLE,
            {
                "b_run_id": run.run_id,
                "b_expected": expected_version,
                "b_status": str(stored.status),
                "b_updated_at": stored.updated_at,
                "b_data": stored.model_dump_json(),
                "b_scope_hash": scope_hash(scope) if scope is not None else None,
                "b_result": result_json(result) if result is not None else None,
                "b_completed_at": then.at,
                "b_release": then.release_limits,
            },
            _one_or_none,
        )
        if row is None:
            return None
        self.changed_runs.append(run.run_id)
        head = ChainHead(run.tenant_id, int(row["chain_seq"]), str(row["head_hash"]))
        await append_at_head(self, head, then.events(stored))
        return stored

    async def create_reserved(
        self, scope: DuplicateScope, run: ActionRun, events: Sequence[AuditEvent]
    ) -> Reservation:
        if not events or any(e.tenant_id != run.tenant_id for e in events):
            return await self._create_reserved_in_steps(scope, run, events)
        values = duplicate_values(scope, run.run_id, run.input_hash, run.updated_at)
        params = {f"d_{name}": value for name, value in values.items()}
        params["b_tenant"] = run.tenant_id
        row = await self.write(_RESERVE, params, _one_or_none)
        if row is None:  # taken: nothing was written; read the holder the ordinary way
            return await self._create_reserved_in_steps(scope, run, events)
        head = ChainHead(run.tenant_id, int(row["chain_seq"]), str(row["head_hash"]))
        if not await append_at_head(self, head, events, new_run=run_values(run)):
            raise RunAlreadyExists(run.run_id)
        self.changed_runs.append(run.run_id)
        return Reservation(accepted=True)

    async def _create_reserved_in_steps(
        self, scope: DuplicateScope, run: ActionRun, events: Sequence[AuditEvent]
    ) -> Reservation:
        reservation = await self.duplicates.reserve(
            scope, run.run_id, run.input_hash, run.updated_at
        )
        if reservation.accepted:
            await self.runs.create(run)
            await self.audit.append(events)
        return reservation


async def _end(conn: AsyncConnection, *, commit: bool) -> None:
    """End the transaction and give the connection back to the pool (``unit._end``'s rules:
    the pool does not reset connections, so one that could not be ended is invalidated)."""
    try:
        await direct.end(conn, commit=commit)
    except BaseException:
        await conn.invalidate()
        await conn.close()
        raise
    await conn.close()


def _one_or_none(result: CursorResult[Any]) -> Any:
    return result.mappings().one_or_none()
