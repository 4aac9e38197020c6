"""``AuditLog`` over ``signoff_audit_events``: append-only, one hash chain per tenant.

``append`` takes each tenant's chain head with one upsert (``bump_head``) that advances its
number by the batch size and holds the head row's lock until the unit commits (SQLite: the
database write lock), numbers and hashes the batch after it (``core/chain.link``), inserts the
events and stores the new head hash. Two writers of one tenant therefore queue on the head row
and can never fork the chain; the unique ``(tenant_id, chain_seq)`` index is the backstop.
Tenants are locked in sorted order, and the pipeline appends audit last in each unit, so the head
lock is held only until commit and no lock cycle can form.

On SQLite the whole append (bump, link, insert, head hash) is one job for the writer thread,
held back like any write nobody waits on: it costs the unit no thread hop of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import CursorResult
from sqlalchemy.sql.base import Executable

from signoff.core.chain import by_tenant, head_after, link
from signoff.core.ports import AuditEvent, ChainHead, Checkpoint, CheckpointRound
from signoff.store.sql.codec import (
    audit_from_row,
    audit_values,
    checkpoint_from_row,
    checkpoint_values,
    round_from_row,
    round_heads_from_json,
    round_values,
)
from signoff.store.sql.direct import Executes
from signoff.store.sql.tables import (
    AUDIT_ROUNDS,
    audit_checkpoints,
    audit_events,
    audit_heads,
    audit_rounds,
    runs,
)

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit


class SqlAuditLog:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, events: Sequence[AuditEvent]) -> None:
        unit = self._unit
        sql = unit.sql
        groups = list(by_tenant(events))
        if unit.on_writer:

            def append_on_writer(conn: Executes) -> None:
                for tenant_id, batch in groups:
                    params = {"b_tenant": tenant_id, "b_count": len(batch)}
                    head = _head(tenant_id, len(batch), conn.execute(sql.bump_head, params))
                    linked = link(head, batch)
                    conn.execute(sql.insert_audit, [audit_values(event) for event in linked])
                    conn.execute(
                        sql.set_head_hash, {"b_tenant": tenant_id, "b_hash": linked[-1].hash}
                    )

            unit.defer(append_on_writer)
            return
        for tenant_id, batch in groups:
            head = await self._take_head(tenant_id, len(batch))
            linked = link(head, batch)
            rows = [audit_values(event) for event in linked]
            if unit.sql.dialect == "postgresql":
                # One round trip: the rows are inserted by a CTE of the head's UPDATE.
                params = _columns(rows) | {"b_tenant": tenant_id, "b_hash": linked[-1].hash}
                await unit.write(_INSERT_THEN_SET_HEAD, params)
                unit.chained(head_after(head, linked))
                continue
            await unit.write(sql.insert_audit, rows)
            await unit.write(sql.set_head_hash, {"b_tenant": tenant_id, "b_hash": linked[-1].hash})

    async def _take_head(self, tenant_id: str, count: int) -> ChainHead:
        """Reserve ``count`` numbers after the tenant's head (locking it); the head before."""
        unit = self._unit
        params = {"b_tenant": tenant_id, "b_count": count}
        head: ChainHead
        if unit.sql.bump_returns:
            head = await unit.write(
                unit.sql.bump_head, params, lambda result: _head(tenant_id, count, result)
            )
            return head
        await unit.write(unit.sql.bump_head, params)
        head = await unit.read(
            unit.sql.read_head,
            {"b_tenant": tenant_id},
            lambda result: _head(tenant_id, count, result),
        )
        return head

    async def list_for_run(self, run_id: str) -> list[AuditEvent]:
        rows = await self._unit.read(self._unit.sql.audit_for_run, {"b_run_id": run_id}, _rows)
        return self._decoded(rows)

    async def scan(
        self, after_seq: int = 0, limit: int = 500, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        query = sa.select(audit_events).where(audit_events.c.seq > after_seq)
        if tenant_id is not None:
            query = query.where(audit_events.c.tenant_id == tenant_id)
        query = query.order_by(audit_events.c.seq).limit(max(limit, 0))
        found = self._decoded(await self._unit.read(query, None, _rows))
        # MySQL compares with trailing-space padding; a tenant must match exactly.
        return found if tenant_id is None else [e for e in found if e.tenant_id == tenant_id]

    async def heads(self) -> list[ChainHead]:
        rows = await self._unit.read(self._unit.sql.all_heads, None, _rows)
        return [
            ChainHead(row["tenant_id"], int(row["chain_seq"]), row["head_hash"]) for row in rows
        ]

    async def pre_chain_through(self) -> int:
        value = await self._unit.read(self._unit.sql.pre_chain_through, None, _scalar)
        return int(value) if value is not None else 0

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        unit = self._unit
        await unit.write_unanswered(unit.sql.insert_checkpoint, checkpoint_values(checkpoint))

    async def checkpoints(
        self, tenant_id: str | None = None, after_id: int = 0, limit: int = 500
    ) -> list[Checkpoint]:
        query = sa.select(audit_checkpoints).where(audit_checkpoints.c.id > after_id)
        if tenant_id is not None:
            query = query.where(audit_checkpoints.c.tenant_id == tenant_id)
        query = query.order_by(audit_checkpoints.c.id).limit(max(limit, 0))
        found = [checkpoint_from_row(row) for row in await self._unit.read(query, None, _rows)]
        return found if tenant_id is None else [c for c in found if c.tenant_id == tenant_id]

    async def add_round(
        self, checkpoint_round: CheckpointRound, checkpoints: Sequence[Checkpoint]
    ) -> bool:
        """The round's row first: a concurrent writer of the same number waits on its key
        (SQLite: the write lock) and then finds it taken, before writing anything else."""
        unit = self._unit
        if not await unit.insert_or_nothing(unit.sql.insert_round, round_values(checkpoint_round)):
            return False
        if checkpoints:
            rows = [checkpoint_values(checkpoint) for checkpoint in checkpoints]
            await unit.write_unanswered(unit.sql.insert_checkpoint, rows)
        return True

    async def rounds(self, after_round: int = 0, limit: int = 100) -> list[CheckpointRound]:
        query = (
            sa.select(audit_rounds)
            .where(audit_rounds.c.round > after_round)
            .order_by(audit_rounds.c.round)
            .limit(max(limit, 0))
        )
        return [self._round(row) for row in await self._unit.read(query, None, _rows)]

    async def latest_round(self) -> CheckpointRound | None:
        query = sa.select(audit_rounds).order_by(audit_rounds.c.round.desc()).limit(1)
        rows = await self._unit.read(query, None, _rows)
        return self._round(rows[0]) if rows else None

    def _round(self, row: Mapping[Any, Any]) -> CheckpointRound:
        try:
            heads = round_heads_from_json(row["heads"])
        except ValueError as exc:
            # Kept without its listing: its hash no longer matches, which verify reports.
            self._unit.faults.record(AUDIT_ROUNDS, str(row["round"]), exc)
            heads = ()
        return round_from_row(row, heads)

    def _decoded(self, rows: Iterable[Mapping[Any, Any]]) -> list[AuditEvent]:
        events: list[AuditEvent] = []
        for row in rows:
            try:
                events.append(audit_from_row(row))
            except ValueError as exc:
                # Keep the event (kind and status are plain columns) without its detail, so the
                # trail still explains the run; its hash no longer matches, which verify reports.
                self._unit.faults.record("signoff_audit_events", str(row["seq"]), exc)
                events.append(audit_from_row({**row, "data": '{"undecodable":true}'}))
        return events


async def append_at_head(
    unit: SqlUnit,
    head: ChainHead,
    events: Sequence[AuditEvent],
    *,
    new_run: dict[str, Any] | None = None,
) -> tuple[bool, ChainHead]:
    """PostgreSQL: append ``head.tenant_id``'s events after ``head``, whose row this unit has
    locked without advancing it (``postgres_unit.py``): the rows and the new head (number and
    hash) in one statement; with ``new_run`` (a run row), the run is inserted by the same
    statement. ``False``: that run id was taken (the caller raises ``RunAlreadyExists``, which
    rolls the whole unit back). Events of another tenant take the ordinary way. Also answers
    the tenant's head after the append."""
    mine = [e for e in events if e.tenant_id == head.tenant_id]
    others = [e for e in events if e.tenant_id != head.tenant_id]
    created = True
    linked = link(head, mine)
    params = _columns([audit_values(event) for event in linked])
    last = linked[-1] if linked else None
    params |= {
        "b_tenant": head.tenant_id,
        "b_hash": last.hash if last is not None else head.hash,
        "b_seq": last.chain_seq if last is not None else head.chain_seq,
    }
    if new_run is None:
        if mine:
            await unit.write(_INSERT_THEN_SET_HEAD_AND_SEQ, params)
    else:
        params |= {f"r_{name}": value for name, value in new_run.items()}
        created = bool(await unit.write(_RUN_AND_EVENTS, params, _scalar) == 1)
    if others:
        await unit.audit.append(others)
    return created, head_after(head, linked)


def _columns(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"b_{c}s": [row[c] for row in rows] for c in _COLUMNS}


def _head(tenant_id: str, count: int, result: CursorResult[Any]) -> ChainHead:
    row = result.mappings().one()
    return ChainHead(tenant_id, int(row["chain_seq"]) - count, str(row["head_hash"]))


def _rows(result: CursorResult[Any]) -> list[Any]:
    return list(result.mappings())


def _scalar(result: CursorResult[Any]) -> Any:
    return result.scalar_one_or_none()


_COLUMNS = (
    "run_id",
    "tenant_id",
    "kind",
    "at",
    "actor",
    "status",
    "code",
    "data",
    "chain_seq",
    "prev_hash",
    "hash",
)


def events_where(condition: sa.ColumnElement[bool] | None = None) -> Any:
    """PostgreSQL: a CTE inserting the ``b_<column>s`` arrays' rows (if ``condition`` holds)."""
    arrays = [sa.bindparam(f"b_{c}s", type_=ARRAY(audit_events.c[c].type)) for c in _COLUMNS]
    rows = sa.func.unnest(*arrays).table_valued(*_COLUMNS).render_derived(name="e")
    selected = sa.select(*(rows.c[c] for c in _COLUMNS))
    if condition is not None:
        selected = selected.where(condition)
    return sa.insert(audit_events).from_select(list(_COLUMNS), selected).cte("signoff_new_events")


def _insert_then_set_head(*, seq: bool = False, run: bool = False) -> Executable:
    """PostgreSQL: ``WITH ins AS (INSERT ... SELECT * FROM unnest(arrays)) UPDATE heads``.

    A data-modifying CTE runs whether or not the statement refers to it, in the same snapshot
    and transaction. The rows travel as one array per column, so it is one statement for any
    number of events: compiled once and prepared once per connection (a multi-row ``VALUES``
    would be a new statement, compiled again, for every call). ``seq``: also set the head's
    number (a head locked without advancing it). ``run``: also insert a run row (``r_*``
    parameters) by a CTE, and return how many were inserted (0: its id was taken)."""
    inserted = events_where()
    values: dict[str, Any] = {"head_hash": sa.bindparam("b_hash")}
    if seq:
        values["chain_seq"] = sa.bindparam("b_seq", type_=audit_heads.c.chain_seq.type)
    statement = (
        sa.update(audit_heads)
        .where(audit_heads.c.tenant_id == sa.bindparam("b_tenant"))
        .values(values)
        .add_cte(inserted)
    )
    if not run:
        return statement
    new_run = (
        postgresql.insert(runs)
        .values({c.name: sa.bindparam(f"r_{c.name}", type_=c.type) for c in runs.columns})
        .on_conflict_do_nothing(index_elements=["run_id"])
        .returning(runs.c.run_id)
        .cte("signoff_new_run")
    )
    counted = sa.select(sa.func.count()).select_from(new_run).scalar_subquery()
    return statement.add_cte(new_run).returning(counted)


_INSERT_THEN_SET_HEAD = _insert_then_set_head()
_INSERT_THEN_SET_HEAD_AND_SEQ = _insert_then_set_head(seq=True)
_RUN_AND_EVENTS = _insert_then_set_head(seq=True, run=True)
