"""``AuditLog`` over ``signoff_audit_events``: append-only; ``seq`` comes from the database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from signoff.core.ports import AuditEvent
from signoff.store.sql.codec import audit_from_row, audit_values

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit


class SqlAuditLog:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def append(self, events: Sequence[AuditEvent]) -> None:
        if not events:
            return
        unit = self._unit
        await unit.write(unit.sql.insert_audit, [audit_values(event) for event in events])

    async def list_for_run(self, run_id: str) -> list[AuditEvent]:
        result = await self._unit.read(self._unit.sql.audit_for_run, {"b_run_id": run_id})
        return [audit_from_row(row) for row in result.mappings()]
