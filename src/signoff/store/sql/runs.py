"""``RunStore`` over ``signoff_runs``: create never overwrites; compare-and-set is one UPDATE."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import CursorResult

from signoff.core.ports import RunAlreadyExists
from signoff.core.run import ActionRun, RunStatus
from signoff.core.short_ids import TAIL_START
from signoff.store.sql.codec import run_from_data, run_values
from signoff.store.sql.tables import runs

if TYPE_CHECKING:
    from signoff.store.sql.unit import SqlUnit


class SqlRunStore:
    __slots__ = ("_unit",)

    def __init__(self, unit: SqlUnit) -> None:
        self._unit = unit

    async def create(self, run: ActionRun) -> None:
        unit = self._unit
        run_id = run.run_id
        if unit.sql.conflict_free_inserts:

            def check(result: CursorResult[Any]) -> None:
                if result.rowcount != 1:
                    raise RunAlreadyExists(run_id)

            # Nobody reads an answer: on SQLite this rides with the unit's next statement.
            await unit.write_unanswered(unit.sql.insert_run, run_values(run), check)
        elif not await unit.insert_or_nothing(unit.sql.insert_run, run_values(run)):
            raise RunAlreadyExists(run_id)
        unit.changed_runs.append(run_id)

    async def get(self, run_id: str) -> ActionRun | None:
        data = await self._unit.read(self._unit.sql.get_run, {"b_run_id": run_id}, _one_scalar)
        if data is None:
            return None
        run = self._decode(run_id, data)
        if run is None:
            return None
        # MySQL compares with trailing-space padding; an id must match exactly.
        return run if run.run_id == run_id else None

    async def compare_and_set(self, expected_version: int, run: ActionRun) -> ActionRun | None:
        """``UPDATE ... SET version = :v + 1 WHERE run_id = :id AND version = :v AND status NOT IN
        (terminal)``: exactly one writer per version gets row count 1; ``None`` for the others."""
        unit = self._unit
        stored = run.model_copy(update={"version": expected_version + 1})
        count = await unit.write(
            unit.sql.compare_and_set,
            {
                "b_run_id": run.run_id,
                "b_expected": expected_version,
                "b_status": str(stored.status),
                "b_updated_at": stored.updated_at,
                "b_data": stored.model_dump_json(),
            },
        )
        if count != 1:
            return None
        unit.changed_runs.append(run.run_id)
        return stored

    async def list(
        self,
        tenant_id: str | None = None,
        statuses: Sequence[RunStatus] | None = None,
        limit: int = 100,
        before_run_id: str | None = None,
        *,
        after_run_id: str | None = None,
        oldest_first: bool = False,
        principal_id: str | None = None,
        id_tail: str | None = None,
    ) -> list[ActionRun]:
        """Newest first, or oldest first (run ids are time-ordered UUIDv7); ``before_run_id`` and
        ``after_run_id`` are exclusive bounds."""
        if limit <= 0:
            return []
        query = sa.select(runs.c.run_id, runs.c.data)
        if tenant_id is not None:
            query = query.where(runs.c.tenant_id == tenant_id)
        wanted = sorted({str(s) for s in statuses or ()})
        if len(wanted) == 1:
            # Equality, not IN: the planner then walks (tenant_id, status, run_id) in order.
            query = query.where(runs.c.status == wanted[0])
        elif wanted:
            query = query.where(runs.c.status.in_(wanted))
        if before_run_id is not None:
            query = query.where(runs.c.run_id < before_run_id)
        if after_run_id is not None:
            query = query.where(runs.c.run_id > after_run_id)
        if principal_id is not None:
            query = query.where(runs.c.principal_id == principal_id)
        if id_tail is not None:
            # No index serves this: the tenant's rows are scanned (a short id is typed by a person).
            tail = sa.func.substr(runs.c.run_id, TAIL_START + 1, len(id_tail))
            query = query.where(tail == id_tail)
        order = runs.c.run_id.asc() if oldest_first else runs.c.run_id.desc()
        found: list[ActionRun] = []
        cursor: str | None = None
        # An undecodable row is skipped, and the page is refilled past it: callers page with
        # "fewer than ``limit`` means the end", so a skipped row must not end the listing.
        while len(found) < limit:
            missing = limit - len(found)
            if cursor is None:
                page = query
            elif oldest_first:
                page = query.where(runs.c.run_id > cursor)
            else:
                page = query.where(runs.c.run_id < cursor)
            rows = await self._unit.read(page.order_by(order).limit(missing), None, _all_rows)
            for row in rows:
                run = self._decode(row["run_id"], row["data"])
                if run is not None and (tenant_id is None or run.tenant_id == tenant_id):
                    found.append(run)
            if len(rows) < missing:
                break
            cursor = rows[-1]["run_id"]
        return found

    def _decode(self, row_id: str, data: str) -> ActionRun | None:
        try:
            return run_from_data(data)
        except ValueError as exc:  # pydantic's ValidationError and the JSON parser's errors
            self._unit.faults.record("signoff_runs", row_id, exc)
            return None


def _one_scalar(result: CursorResult[Any]) -> Any:
    return result.scalar_one_or_none()


def _all_rows(result: CursorResult[Any]) -> list[Any]:
    return list(result.mappings())
