"""``AuditLog`` over ``signoff_audit_events``: append-only, one hash chain per tenant.

``append`` takes each tenant's chain head with one upsert (``bump_head``) that advances its
number by the batch size and holds the head row's lock until the unit commits (SQLite: the
database write lock), numbers and hashes the batch after it (``core/chain.link``), inserts the
events and stores the new head hash. Two writers of one tenant therefore queue on the head row
and can never fork the chain; the unique ``(tenant_id, chain_seq)`` index is the backstop.
Tenants are locked in sorted order, and the pipeline appends audit last in each unit, so the head
lock is held only until commit and no lock cycle can form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from signoff.core.chain import by_tenant, link
from signoff.core.ports import AuditEvent, ChainHead, Checkpoint
from signoff.store.sql.codec import (
    audit_from_row,
    audit_values,
    checkpoint_from_row,
    checkpoint_values,
)
from signoff.store.sql.tables import audit_checkpoints, audit_events

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit


class SqlAuditLog:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, events: Sequence[AuditEvent]) -> None:
        unit = self._unit
        for tenant_id, batch in by_tenant(events):
            head = await self._take_head(tenant_id, len(batch))
            linked = link(head, batch)
            await unit.write(unit.sql.insert_audit, [audit_values(event) for event in linked])
            await unit.write(
                unit.sql.set_head_hash, {"b_tenant": tenant_id, "b_hash": linked[-1].hash}
            )

    async def _take_head(self, tenant_id: str, count: int) -> ChainHead:
        """Reserve ``count`` numbers after the tenant's head (locking it); the head before."""
        unit = self._unit
        params = {"b_tenant": tenant_id, "b_count": count}
        result = await unit.write(unit.sql.bump_head, params)
        if not unit.sql.bump_returns:
            result = await unit.read(unit.sql.read_head, {"b_tenant": tenant_id})
        row = result.mappings().one()
        return ChainHead(tenant_id, int(row["chain_seq"]) - count, str(row["head_hash"]))

    async def list_for_run(self, run_id: str) -> list[AuditEvent]:
        result = await self._unit.read(self._unit.sql.audit_for_run, {"b_run_id": run_id})
        return self._decoded(result.mappings())

    async def scan(
        self, after_seq: int = 0, limit: int = 500, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        query = sa.select(audit_events).where(audit_events.c.seq > after_seq)
        if tenant_id is not None:
            query = query.where(audit_events.c.tenant_id == tenant_id)
        query = query.order_by(audit_events.c.seq).limit(max(limit, 0))
        result = await self._unit.read(query)
        found = self._decoded(result.mappings())
        # MySQL compares with trailing-space padding; a tenant must match exactly.
        return found if tenant_id is None else [e for e in found if e.tenant_id == tenant_id]

    async def heads(self) -> list[ChainHead]:
        result = await self._unit.read(self._unit.sql.all_heads)
        return [
            ChainHead(row["tenant_id"], int(row["chain_seq"]), row["head_hash"])
            for row in result.mappings()
        ]

    async def pre_chain_through(self) -> int:
        value = (await self._unit.read(self._unit.sql.pre_chain_through)).scalar_one_or_none()
        return int(value) if value is not None else 0

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        unit = self._unit
        await unit.write(unit.sql.insert_checkpoint, checkpoint_values(checkpoint))

    async def checkpoints(
        self, tenant_id: str | None = None, after_id: int = 0, limit: int = 500
    ) -> list[Checkpoint]:
        query = sa.select(audit_checkpoints).where(audit_checkpoints.c.id > after_id)
        if tenant_id is not None:
            query = query.where(audit_checkpoints.c.tenant_id == tenant_id)
        query = query.order_by(audit_checkpoints.c.id).limit(max(limit, 0))
        result = await self._unit.read(query)
        found = [checkpoint_from_row(row) for row in result.mappings()]
        return found if tenant_id is None else [c for c in found if c.tenant_id == tenant_id]

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
