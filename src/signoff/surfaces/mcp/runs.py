"""Reads and cancellation behind ``signoff_get_run`` / ``cancel_run`` / ``list_runs``.

Every query is scoped to the caller's tenant; a run of another tenant answers exactly like a run
that does not exist (``ACTION_RUN_NOT_FOUND``).
"""

from __future__ import annotations

from signoff.core.answers import outcome_of, stored_statuses_for
from signoff.core.approvals import is_overdue
from signoff.core.codes import ExecutionStatus
from signoff.core.input_limits import has_bad_text, safe_text
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.tools import MAX_WAIT_SECONDS, RunList

_MAX_PAGES = 10


def _plausible(run_id: str) -> bool:
    """Could be a run id: bounded, no NUL or lone surrogate (which some databases reject with
    an error carrying the SQL and its parameters)."""
    return 0 < len(run_id) <= 64 and not has_bad_text(run_id)


class RunQueries:
    """``draining``: once shutdown begins, a long-poll answers at once with the current outcome."""

    def __init__(self, runtime: Runtime, draining: Draining | None = None) -> None:
        self.runtime = runtime
        self.draining = draining

    async def find(self, caller: Caller, run_id: str) -> ActionOutcome | None:
        """The run's outcome, or ``None``: an id no run can have is not looked up at all."""
        if not _plausible(run_id):
            return None
        return await self.runtime.get(run_id, caller.tenant_id, reader=caller.reader())

    async def get(self, caller: Caller, run_id: str, wait_seconds: float = 0) -> ActionOutcome:
        """The run's outcome; with ``wait_seconds`` it first waits (woken by the change itself)."""
        if not _plausible(run_id):
            return Runtime.not_found(safe_text(run_id, 64))
        wait = min(max(wait_seconds, 0.0), float(MAX_WAIT_SECONDS))
        waited, outcome = False, None
        reader = caller.reader()
        if wait > 0 and self.draining is None:
            waited, outcome = (
                True,
                await self.runtime.wait(run_id, caller.tenant_id, wait, reader=reader),
            )
        elif wait > 0 and self.draining is not None and not self.draining.started:
            waited, outcome = await self.draining.unless_draining(
                self.runtime.wait(run_id, caller.tenant_id, wait, reader=reader)
            )
        if not waited:
            outcome = await self.runtime.get(run_id, caller.tenant_id, reader=reader)
        return outcome if outcome is not None else Runtime.not_found(run_id)

    async def cancel(self, caller: Caller, run_id: str) -> ActionOutcome:
        if not _plausible(run_id):
            return Runtime.not_found(safe_text(run_id, 64))
        return await self.runtime.cancel(
            run_id, caller.tenant_id, caller.principal, reader=caller.reader()
        )

    async def list(
        self, caller: Caller, *, status: str | None, limit: int, before: str | None
    ) -> RunList:
        """Newest first, only runs the caller may read (``core.visibility``). With ``status``,
        pages through the store until ``limit`` runs match."""
        wanted = ExecutionStatus(status) if status is not None else None
        statuses = sorted(stored_statuses_for(wanted)) if wanted is not None else None
        found: list[ActionOutcome] = []
        cursor = before if before is None or _plausible(before) else ""
        exhausted = False
        for _ in range(_MAX_PAGES):
            page = await self.runtime.page_runs(
                caller.tenant_id,
                caller.reader(),
                statuses=statuses,
                limit=limit,
                cursor=cursor,
            )
            for run in page.runs:
                cursor = run.run_id
                outcome = await self._current(run, caller)
                if outcome is not None and (wanted is None or outcome.status is wanted):
                    found.append(outcome)
                    if len(found) == limit:
                        break
            if len(found) == limit:
                break
            if page.cursor is None:
                exhausted = True
                break
            cursor = page.cursor
        return RunList(runs=found, next_before=None if exhausted else cursor)

    async def _current(self, run: ActionRun, caller: Caller) -> ActionOutcome | None:
        if is_overdue(run, self.runtime.now()):
            # Through the runtime, so an approval past its deadline reads as expired. A run
            # that is not overdue reads as listed: no second read per waiting run.
            return await self.runtime.get(run.run_id, caller.tenant_id, reader=caller.reader())
        return outcome_of(run)
