"""``DuplicateStore`` over ``signoff_duplicates``: the primary key decides who reserves first.

``complete`` and ``release`` are single statements guarded by ``owner_run_id = :owner AND
state = 'RUNNING'``, so a stale owner can never touch a newer reservation or a kept result. A
RUNNING entry is never taken over or purged, whatever its age.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import CursorResult

from signoff.core.ports import DuplicateEntry, Reservation
from signoff.core.results import ExecutionResult
from signoff.core.run import DuplicateScope
from signoff.store.sql.codec import duplicate_from_row, duplicate_values, result_json, scope_hash

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit

# A reservation can only vanish between our insert and our read when its owner released it
# (PostgreSQL, READ COMMITTED); then the next insert usually wins. Bounded all the same.
_RESERVE_ATTEMPTS = 16


class SqlDuplicateStore:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation:
        unit = self._unit
        values = duplicate_values(scope, owner_run_id, input_hash, now)
        for _ in range(_RESERVE_ATTEMPTS):
            if await unit.insert_or_nothing(unit.sql.insert_duplicate, values):
                return Reservation(accepted=True)
            existing = await self._get(values["scope_hash"])
            if existing is not None:
                return Reservation(accepted=False, existing=existing)
        raise RuntimeError(f"reserve: the scope of {owner_run_id} keeps changing hands")

    async def complete(
        self, scope: DuplicateScope, owner_run_id: str, result: ExecutionResult, now: datetime
    ) -> bool:
        unit = self._unit
        count = await unit.write(
            unit.sql.complete_duplicate,
            {
                "b_scope_hash": scope_hash(scope),
                "b_owner": owner_run_id,
                "b_result": result_json(result),
                "b_completed_at": now,
            },
        )
        return bool(count == 1)

    async def release(self, scope: DuplicateScope, owner_run_id: str) -> bool:
        unit = self._unit
        count = await unit.write(
            unit.sql.release_duplicate,
            {"b_scope_hash": scope_hash(scope), "b_owner": owner_run_id},
        )
        return bool(count == 1)

    async def get(self, scope: DuplicateScope) -> DuplicateEntry | None:
        return await self._get(scope_hash(scope))

    async def purge_completed(self, older_than: datetime) -> int:
        """Delete COMPLETED entries completed before ``older_than``; RUNNING ones never."""
        unit = self._unit
        count: int = await unit.write(unit.sql.purge_duplicates, {"b_older_than": older_than})
        return count

    async def _get(self, key: str) -> DuplicateEntry | None:
        row = await self._unit.read(self._unit.sql.get_duplicate, {"b_scope_hash": key}, _one_row)
        if row is None:
            return None
        try:
            return duplicate_from_row(row)
        except ValueError as exc:
            # The kept result cannot be read back: answer "in progress" (retry later) rather
            # than fail the proposal; the row is reported by `signoff audit verify`.
            self._unit.faults.record("signoff_duplicates", key, exc)
            return duplicate_from_row({**row, "result": None})


def _one_row(result: CursorResult[Any]) -> Any:
    return result.mappings().one_or_none()
