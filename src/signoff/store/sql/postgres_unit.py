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
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.selectable import Select

from signoff.core.chain import GENESIS, link
from signoff.core.ports import (
    AuditEvent,
    ChainHead,
    DuplicateState,
    Reservation,
    RunAlreadyExists,
    Settlement,
)
from signoff.core.run import ActionRun, DuplicateScope
from signoff.store.faults import DecodeFaults
from signoff.store.sql import postgres_direct as direct
from signoff.store.sql.audit import _columns, append_at_head, events_where
from signoff.store.sql.codec import (
    audit_values,
    duplicate_values,
    result_json,
    run_values,
    scope_hash,
)
from signoff.store.sql.postgres_heads import ChainHeads
from signoff.store.sql.statements import TERMINAL_LITERALS, Statements
from signoff.store.sql.tables import audit_heads, duplicates, limit_reservations, runs
from signoff.store.sql.unit import Extract, Params, SqlUnit, rowcount
from signoff.store.sql.writer import SqliteWriter


def _settle_writes() -> tuple[Any, Any, Any]:
    """The compare-and-set and, each only if it matched a row, completion and release."""
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
    return cas, completed, released


def _settle_statement() -> Select[Any]:
    cas, completed, released = _settle_writes()
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


def _move_head(condition: sa.ColumnElement[bool]) -> Any:
    """The tenant's head moved to ``b_seq``/``b_hash`` if ``condition`` holds and it is still
    exactly ``b_old_seq``/``b_old_hash`` (re-checked on the latest row after its lock)."""
    return (
        sa.update(audit_heads)
        .where(
            audit_heads.c.tenant_id == sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
            audit_heads.c.chain_seq
            == sa.bindparam("b_old_seq", type_=audit_heads.c.chain_seq.type),
            audit_heads.c.head_hash
            == sa.bindparam("b_old_hash", type_=audit_heads.c.head_hash.type),
            condition,
        )
        .values(
            chain_seq=sa.bindparam("b_seq", type_=audit_heads.c.chain_seq.type),
            head_hash=sa.bindparam("b_hash", type_=audit_heads.c.head_hash.type),
        )
        .returning(audit_heads.c.tenant_id)
        .cte("signoff_head")
    )


def _count(cte: Any, name: str) -> Any:
    return sa.select(sa.func.count()).select_from(cte).scalar_subquery().label(name)


def _fast_settle_statement() -> Select[Any]:
    """Settle after an assumed head: CAS, and if it won, completion, release, head, rows."""
    cas, completed, released = _settle_writes()
    head = _move_head(sa.exists(sa.select(cas.c.tenant_id)))
    rows = events_where(sa.exists(sa.select(head.c.tenant_id)))
    return sa.select(_count(cas, "won"), _count(head, "linked")).add_cte(completed, released, rows)


def _fast_create_statement() -> Select[Any]:
    """Create reserved after an assumed head: the reservation, and if it was free the run, and
    if that id was free the head and the rows."""
    reserved = (
        postgresql.insert(duplicates)
        .values({c.name: sa.bindparam(f"d_{c.name}", type_=c.type) for c in duplicates.columns})
        .on_conflict_do_nothing(index_elements=["scope_hash"])
        .returning(duplicates.c.scope_hash)
        .cte("signoff_reserved")
    )
    new_run = (
        postgresql.insert(runs)
        .from_select(
            [c.name for c in runs.columns],
            sa.select(
                *(sa.bindparam(f"r_{c.name}", type_=c.type) for c in runs.columns)
            ).select_from(reserved),
        )
        .on_conflict_do_nothing(index_elements=["run_id"])
        .returning(runs.c.run_id)
        .cte("signoff_new_run")
    )
    head = _move_head(sa.exists(sa.select(new_run.c.run_id)))
    rows = events_where(sa.exists(sa.select(head.c.tenant_id)))
    return sa.select(
        _count(reserved, "reserved"), _count(new_run, "created"), _count(head, "linked")
    ).add_cte(rows)


def _lock_head_statement() -> Any:
    """Lock the tenant's head (created at the genesis if it has none) without moving it."""
    lock = postgresql.insert(audit_heads).values(
        tenant_id=sa.bindparam("b_tenant", type_=audit_heads.c.tenant_id.type),
        chain_seq=sa.literal(0, sa.BigInteger()),
        head_hash=sa.literal(GENESIS),
    )
    return lock.on_conflict_do_update(
        index_elements=["tenant_id"], set_={"chain_seq": audit_heads.c.chain_seq}
    ).returning(audit_heads.c.chain_seq, audit_heads.c.head_hash)


_FAST_SETTLE = _fast_settle_statement()
_FAST_CREATE = _fast_create_statement()
_LOCK_HEAD = _lock_head_statement()


class PostgresUnit(SqlUnit):
    """A PostgreSQL unit of work that also settles and creates reserved runs in few statements.

    Writes whose answer needs no result processing run straight on asyncpg
    (``postgres_direct.py``), in the transaction SQLAlchemy tracks for the connection (reads,
    some built per call, keep SQLAlchemy's compiled cache). With the
    tenant's chain head known (``postgres_heads.py``), ``settle`` and ``create_reserved`` are
    one statement each."""

    __slots__ = ("_heads", "_plans", "_set_heads", "_turns")

    def __init__(
        self,
        engine: AsyncEngine,
        sql: Statements,
        writer: SqliteWriter | None = None,
        faults: DecodeFaults | None = None,
        heads: ChainHeads | None = None,
        plans: direct.Plans | None = None,
    ) -> None:
        super().__init__(engine, sql, writer, faults)
        self._heads = heads
        self._plans: direct.Plans = plans if plans is not None else {}
        self._set_heads: dict[str, ChainHead] = {}  # remembered once the unit commits
        self._turns: list[str] = []  # tenants whose turn this unit holds

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
        return direct.plan_for(self._plans, statement, self._engine.dialect, params)

    def chained(self, head: ChainHead) -> None:
        self._set_heads[head.tenant_id] = head

    async def finish(self) -> None:
        conn, self._conn = self._conn, None
        try:
            if conn is not None:
                await _end(conn, commit=self.wrote)
                if self._heads is not None and self.wrote:
                    for head in self._set_heads.values():
                        self._heads.committed(head)
        finally:
            self._release()

    async def abort(self) -> None:
        conn, self._conn = self._conn, None
        self.changed_runs.clear()
        try:
            if conn is not None:
                await _end(conn, commit=False)
        finally:
            self._release()

    def _release(self) -> None:
        self._set_heads.clear()
        turns, self._turns = self._turns, []
        if self._heads is not None:
            for tenant_id in turns:
                self._heads.release(tenant_id)

    async def _assumed_head(self, tenant_id: str) -> ChainHead | None:
        """The tenant's turn for this unit, and the head to assume (``None``: lock it)."""
        heads = self._heads
        if heads is None:
            return None
        if tenant_id not in self._turns:
            if self._conn is None and not self._turns:
                await heads.turn(tenant_id)  # this unit holds no lock yet: safe to wait
            elif not heads.try_turn(tenant_id):
                return None
            self._turns.append(tenant_id)
        if tenant_id in self._set_heads:
            return self._set_heads[tenant_id]  # this unit moved it: its own row is the head
        return heads.get(tenant_id)

    async def _head_moved(self, tenant_id: str) -> ChainHead:
        """The assumed head was not the head: lock the real one (nothing was appended)."""
        assert self._heads is not None
        self._heads.moved(tenant_id)
        head: ChainHead = await self.write(
            _LOCK_HEAD,
            {"b_tenant": tenant_id},
            lambda result: _head_of(tenant_id, result.mappings().one()),
        )
        return head

    async def settle(
        self, expected_version: int, run: ActionRun, then: Settlement
    ) -> ActionRun | None:
        stored = run.model_copy(update={"version": expected_version + 1})
        scope, result = then.complete if then.complete is not None else (None, None)
        params = {
            "b_run_id": run.run_id,
            "b_expected": expected_version,
            "b_status": str(stored.status),
            "b_updated_at": stored.updated_at,
            "b_data": stored.model_dump_json(),
            "b_scope_hash": scope_hash(scope) if scope is not None else None,
            "b_result": result_json(result) if result is not None else None,
            "b_completed_at": then.at,
            "b_release": then.release_limits,
        }
        events = then.events(stored)
        tenant_id = run.tenant_id
        if events and all(e.tenant_id == tenant_id for e in events):
            assumed = await self._assumed_head(tenant_id)
            if assumed is not None:
                linked = link(assumed, events)
                row = await self.write(_FAST_SETTLE, params | _moved(assumed, linked), _one)
                if not row["won"]:
                    return None  # lost: nothing written
                self.changed_runs.append(run.run_id)
                if row["linked"]:
                    self._linked(assumed, linked)
                    return stored
                await self._append_after(await self._head_moved(tenant_id), events)
                return stored
        row = await self.write(_SETTLE, params, _one_or_none)
        if row is None:
            return None
        self.changed_runs.append(run.run_id)
        await self._append_after(_head_of(tenant_id, row), events)
        return stored

    async def create_reserved(
        self, scope: DuplicateScope, run: ActionRun, events: Sequence[AuditEvent]
    ) -> Reservation:
        tenant_id = run.tenant_id
        if not events or any(e.tenant_id != tenant_id for e in events):
            return await self._create_reserved_in_steps(scope, run, events)
        values = duplicate_values(scope, run.run_id, run.input_hash, run.updated_at)
        params: dict[str, Any] = {f"d_{name}": value for name, value in values.items()}
        assumed = await self._assumed_head(tenant_id)
        if assumed is not None:
            linked = link(assumed, events)
            params |= {f"r_{name}": value for name, value in run_values(run).items()}
            row = await self.write(_FAST_CREATE, params | _moved(assumed, linked), _one)
            if not row["reserved"]:  # taken: nothing was written; read the holder
                return await self._create_reserved_in_steps(scope, run, events)
            if not row["created"]:
                raise RunAlreadyExists(run.run_id)  # the unit rolls the reservation back
            self.changed_runs.append(run.run_id)
            if row["linked"]:
                self._linked(assumed, linked)
            else:
                await self._append_after(await self._head_moved(tenant_id), events)
            return Reservation(accepted=True)
        params["b_tenant"] = tenant_id
        row = await self.write(_RESERVE, params, _one_or_none)
        if row is None:  # taken: nothing was written; read the holder the ordinary way
            return await self._create_reserved_in_steps(scope, run, events)
        created, after = await append_at_head(
            self, _head_of(tenant_id, row), events, new_run=run_values(run)
        )
        if not created:
            raise RunAlreadyExists(run.run_id)
        self.chained(after)
        self.changed_runs.append(run.run_id)
        return Reservation(accepted=True)

    def _linked(self, assumed: ChainHead, linked: list[AuditEvent]) -> None:
        assert self._heads is not None
        self._heads.hit(assumed.tenant_id)
        last = linked[-1]
        self.chained(ChainHead(assumed.tenant_id, int(last.chain_seq or 0), str(last.hash)))

    async def _append_after(self, head: ChainHead, events: Sequence[AuditEvent]) -> None:
        """Append after ``head``, whose row this unit has locked without moving it."""
        _, after = await append_at_head(self, head, events)
        self.chained(after)

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


def _moved(assumed: ChainHead, linked: list[AuditEvent]) -> dict[str, Any]:
    last = linked[-1]
    return _columns([audit_values(event) for event in linked]) | {
        "b_tenant": assumed.tenant_id,
        "b_old_seq": assumed.chain_seq,
        "b_old_hash": assumed.hash,
        "b_seq": last.chain_seq,
        "b_hash": last.hash,
    }


def _head_of(tenant_id: str, row: Any) -> ChainHead:
    return ChainHead(tenant_id, int(row["chain_seq"]), str(row["head_hash"]))


def _one(result: CursorResult[Any]) -> Any:
    return result.mappings().one()


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
