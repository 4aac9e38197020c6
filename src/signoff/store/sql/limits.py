"""``LimitLedger`` over ``signoff_limit_counters`` / ``signoff_limit_reservations``.

``lock_totals`` first upserts the subject's counter row: on PostgreSQL and MySQL/MariaDB that
takes the row's lock until the unit commits (a second contender waits there, then reads the
first one's committed reservation under READ COMMITTED); on SQLite it takes the database write
lock. Only then is the window read, so the decision in ``core/limits.reserve`` and the hold that
follows are one atomic step per subject.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import CursorResult

from signoff.core.limits import LimitEntry

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit


class SqlLimitLedger:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def lock_totals(self, key: str, since: datetime, exclude_run: str) -> tuple[int, float]:
        unit = self._unit
        await unit.write(unit.sql.lock_limit, {"b_key": key})
        params = {"b_key": key, "b_since": since, "b_run_id": exclude_run}
        row: Any = await unit.read(unit.sql.limit_totals, params, _one)
        return int(row[0]), float(row[1] or 0.0)

    async def usage(self, key: str, since: datetime) -> list[LimitEntry]:
        entries: list[LimitEntry] = await self._unit.read(
            self._unit.sql.limit_usage, {"b_key": key, "b_since": since}, _entries
        )
        return entries

    async def hold(
        self, key: str, tenant_id: str, run_id: str, amount: float, now: datetime
    ) -> None:
        unit = self._unit
        await unit.write(
            unit.sql.hold_limit,
            {
                "limit_key": key,
                "run_id": run_id,
                "tenant_id": tenant_id,
                "amount": amount,
                "reserved_at": now,
            },
        )

    async def release(self, run_id: str) -> int:
        unit = self._unit
        count: int = await unit.write(unit.sql.release_limits, {"b_run_id": run_id})
        return count

    async def purge(self, older_than: datetime) -> int:
        unit = self._unit
        count: int = await unit.write(unit.sql.purge_limits, {"b_older_than": older_than})
        return count


def _entries(result: CursorResult[Any]) -> list[LimitEntry]:
    return [
        LimitEntry(row["run_id"], row["reserved_at"], float(row["amount"]))
        for row in result.mappings()
    ]


def _one(result: CursorResult[Any]) -> Any:
    return result.one()
