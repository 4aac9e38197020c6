"""PostgreSQL: the ledger's two hot units in one statement each (plus BEGIN and COMMIT).

``RunLedger.terminal`` hands the store a ``Settlement`` (``SettlingUnit.settle``) and
``RunLedger.create`` a reservation with its run and audit (``ReservingUnit.create_reserved``).
With the tenant's chain head known from this store's last commit (``postgres_heads.py``), each
is one statement (``postgres_statements.py``) that appends only if that head is still the
head; if it moved, the same unit locks the real head and appends after it. Unknown, each is two
statements: the compare-and-set or the reservation with the head's lock, then the rows.

The unit's transaction is asyncpg's own, opened on the driver connection (``postgres_direct.py``);
writes whose answer needs no result processing run straight on asyncpg inside it, and
SQLAlchemy's statements run inside it too (SQLAlchemy's side of the connection is in
driver-level autocommit and begins nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.base import Executable

from signoff.core.chain import head_after, link
from signoff.core.ports import (
    AuditEvent,
    ChainHead,
    Reservation,
    RunAlreadyExists,
    Settlement,
)
from signoff.core.run import ActionRun, DuplicateScope
from signoff.store.faults import DecodeFaults
from signoff.store.sql import postgres_direct as direct
from signoff.store.sql.audit import _columns, append_at_head
from signoff.store.sql.codec import (
    audit_values,
    duplicate_values,
    result_json,
    run_values,
    scope_hash,
)
from signoff.store.sql.postgres_heads import ChainHeads
from signoff.store.sql.postgres_statements import (
    FAST_CREATE,
    FAST_SETTLE,
    LOCK_HEAD,
    RESERVE,
    SETTLE,
)
from signoff.store.sql.statements import Statements
from signoff.store.sql.unit import Extract, Params, SqlUnit, rowcount


class PostgresUnit(SqlUnit):
    """A PostgreSQL unit of work that also settles and creates reserved runs in few statements.

    Its transaction is asyncpg's own (``postgres_direct.begin``); writes whose answer needs no
    result processing run straight on asyncpg inside it (reads, some built per call, keep
    SQLAlchemy's compiled cache and run inside it too). With the
    tenant's chain head known (``postgres_heads.py``), ``settle`` and ``create_reserved`` are
    one statement each."""

    __slots__ = ("_driver", "_heads", "_plans", "_set_heads", "_turns", "_xact")

    def __init__(
        self,
        engine: AsyncEngine,
        sql: Statements,
        faults: DecodeFaults,
        heads: ChainHeads,
        plans: direct.Plans,
    ) -> None:
        super().__init__(engine, sql, None, faults)  # PostgreSQL has no writer thread
        self._heads = heads
        self._plans = plans
        self._set_heads: dict[str, ChainHead] = {}  # remembered once the unit commits
        self._turns: list[str] = []  # tenants whose turn this unit holds
        self._driver: Any = None  # the asyncpg connection, once connected
        self._xact: Any = None  # asyncpg's transaction on it: the unit's own

    async def write(
        self, statement: Executable, params: Params, extract: Extract = rowcount
    ) -> Any:
        plan = self._plan(statement, params)
        if plan is None:
            return await super().write(statement, params, extract)
        assert isinstance(params, Mapping)
        self.wrote = True
        conn = self._conn or await self._connect()
        return extract(await direct.execute(conn, self._driver, plan, params))

    async def _connect(self) -> AsyncConnection:
        conn = await self._engine.connect()
        try:
            self._driver, self._xact = await direct.begin(conn)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    def _plan(self, statement: Executable, params: Params) -> direct.Plan | None:
        if not isinstance(params, Mapping):
            return None  # executemany: SQLAlchemy's way
        return direct.plan_for(self._plans, statement, self._engine.dialect, params)

    def chained(self, head: ChainHead) -> None:
        self._set_heads[head.tenant_id] = head

    async def finish(self) -> None:
        conn, self._conn = self._conn, None
        transaction, self._xact, self._driver = self._xact, None, None
        try:
            if conn is not None:
                await _end(conn, transaction, commit=self.wrote)
                if self.wrote:
                    for head in self._set_heads.values():
                        self._heads.committed(head)
        finally:
            self._release()

    async def abort(self) -> None:
        conn, self._conn = self._conn, None
        transaction, self._xact, self._driver = self._xact, None, None
        self.changed_runs.clear()
        try:
            if conn is not None:
                await _end(conn, transaction, commit=False)
        finally:
            self._release()

    def _release(self) -> None:
        self._set_heads.clear()
        turns, self._turns = self._turns, []
        for tenant_id in turns:
            self._heads.release(tenant_id)

    async def _assumed_head(self, tenant_id: str) -> ChainHead | None:
        """The tenant's turn for this unit, and the head to assume (``None``: lock it)."""
        heads = self._heads
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
        self._heads.moved(tenant_id)
        head: ChainHead = await self.write(
            LOCK_HEAD,
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
                row = await self.write(FAST_SETTLE, params | _moved(assumed, linked), _one)
                if not row["won"]:
                    return None  # lost: nothing written
                self.changed_runs.append(run.run_id)
                if row["linked"]:
                    self._linked(assumed, linked)
                    return stored
                await self._append_after(await self._head_moved(tenant_id), events)
                return stored
        row = await self.write(SETTLE, params, _one_or_none)
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
            row = await self.write(FAST_CREATE, params | _moved(assumed, linked), _one)
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
        row = await self.write(RESERVE, params, _one_or_none)
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
        self._heads.hit(assumed.tenant_id)
        self.chained(head_after(assumed, linked))

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


async def _end(conn: AsyncConnection, transaction: Any, *, commit: bool) -> None:
    """End the transaction and give the connection back to the pool (``unit._end``'s rules:
    the pool does not reset connections, so one that could not be ended is invalidated)."""
    try:
        await direct.end(conn, transaction, commit=commit)
    except BaseException:
        await conn.invalidate()
        await conn.close()
        raise
    await conn.close()


def _one_or_none(result: CursorResult[Any]) -> Any:
    return result.mappings().one_or_none()
