"""Reads of stored runs, scoped to a tenant and, for every surface, to a reader.

With a ``reader`` a read answers only what ``core.visibility`` lets that reader see, with sensitive
values masked; anything else reads exactly like a missing run. Without one (operator tools, trusted
in-process code) the tenant alone scopes the read. Nothing here writes a run, except that a read of
an approval past its deadline settles it as expired first (``Approvals.settled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from signoff.core.answers import outcome_of
from signoff.core.approvals import Approvals
from signoff.core.definition import ActionDefinition
from signoff.core.ledger import RunLedger
from signoff.core.limits import LimitCheck, LimitSubject, LimitUsage, subject_of
from signoff.core.ports import AuditEvent, Clock
from signoff.core.registry import ActionRegistry
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun, RunStatus
from signoff.core.short_ids import tail_start
from signoff.core.visibility import Reader, masked_outcome, masked_run, may_read


@dataclass(frozen=True, slots=True)
class IdMatch:
    """What a run id given by a person stands for: the one run (``run_id``), nothing (both
    empty), or several readable runs (``candidates``, newest first: ``RUN_ID_AMBIGUOUS``)."""

    run_id: str | None
    candidates: tuple[str, ...] = ()


# A short id of 6 hex characters collides about once in 16 million runs; reading this many
# matches leaves room for the ones the reader may not see.
_TAIL_MATCHES = 50


@dataclass(frozen=True, slots=True)
class RunPage:
    """Runs a reader may see, and where the next page starts (``None``: nothing more)."""

    runs: list[ActionRun]
    cursor: str | None


class RunReads:
    """The reads ``Runtime`` offers, over the ledger's loads and the approvals' settling."""

    def __init__(
        self, registry: ActionRegistry, ledger: RunLedger, approvals: Approvals, clock: Clock
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._approvals = approvals
        self._clock = clock

    # With a ``reader`` (every surface) a read answers only what ``core.visibility`` lets that
    # reader see, with sensitive values masked; anything else reads exactly like a missing run.
    # Without one (operator tools, trusted in-process code) the tenant alone scopes the read.
    async def get(
        self, run_id: str, tenant_id: str, *, reader: Reader | None = None
    ) -> ActionOutcome | None:
        """The run's outcome, or ``None`` when it does not exist in this tenant (never disclosed)."""
        run = await self.get_run(run_id, tenant_id, reader=reader)
        return self.shown(outcome_of(run), run) if run is not None else None

    async def get_run(
        self, run_id: str, tenant_id: str, *, reader: Reader | None = None
    ) -> ActionRun | None:
        """The stored run in this tenant; an approval past its deadline reads as expired."""
        run = await self._ledger.load_in(run_id, tenant_id)
        if run is None or not self._visible(run, tenant_id, reader):
            return None
        run = await self._approvals.settled(run)
        return self._masked(run) if reader is not None else run

    async def resolve_id(
        self, given: str, tenant_id: str, *, reader: Reader | None = None
    ) -> IdMatch:
        """The run ``given`` names in this tenant: anything but a short id (a start of an id's
        random tail, ``core.short_ids``) is taken as a whole id, unchecked (the read or decision
        that follows answers for it); a short id is looked up among the runs ``reader`` may see,
        so a run the reader may not see is never named and never makes it ambiguous."""
        start = tail_start(given)
        if start is None:
            return IdMatch(given.strip())
        found = await self._ledger.runs(tenant_id=tenant_id, id_tail=start, limit=_TAIL_MATCHES)
        readable = tuple(r.run_id for r in found if self._visible(r, tenant_id, reader))
        if len(readable) == 1:
            return IdMatch(readable[0])
        return IdMatch(None, readable)

    async def wait(
        self, run_id: str, tenant_id: str, timeout: float, *, reader: Reader | None = None
    ) -> ActionOutcome | None:
        """Long-poll: return once the run changes or reaches a final state, or at ``timeout``."""
        run = await self.get_run(run_id, tenant_id, reader=reader)
        if run is None or run.is_terminal or timeout <= 0:
            return self.shown(outcome_of(run), run) if run is not None else None
        await self._ledger.wait_for_change(run_id, run.version, timeout)
        return await self.get(run_id, tenant_id, reader=reader)

    async def list_runs(
        self,
        tenant_id: str,
        *,
        statuses: Sequence[RunStatus] | None = None,
        limit: int = 100,
        before_run_id: str | None = None,
        after_run_id: str | None = None,
        oldest_first: bool = False,
    ) -> list[ActionRun]:
        """One page of the tenant's stored runs, unscoped (operator tools): newest first, or
        ``oldest_first``; ``before_run_id``/``after_run_id`` continue."""
        return await self._ledger.runs(
            tenant_id=tenant_id,
            statuses=statuses,
            limit=limit,
            before_run_id=before_run_id,
            after_run_id=after_run_id,
            oldest_first=oldest_first,
        )

    async def page_runs(
        self,
        tenant_id: str,
        reader: Reader,
        *,
        statuses: Sequence[RunStatus] | None = None,
        limit: int = 100,
        cursor: str | None = None,
        oldest_first: bool = False,
        scan_pages: int = 10,
    ) -> RunPage:
        """Up to ``limit`` runs ``reader`` may see (masked), scanning at most ``scan_pages`` store
        pages; ``RunPage.cursor`` continues after the last run scanned (``None``: no more)."""
        found: list[ActionRun] = []
        for _ in range(scan_pages):
            batch = await self.list_runs(
                tenant_id,
                statuses=statuses,
                limit=limit,
                before_run_id=None if oldest_first else cursor,
                after_run_id=cursor if oldest_first else None,
                oldest_first=oldest_first,
            )
            for run in batch:
                cursor = run.run_id
                if self._visible(run, tenant_id, reader):
                    found.append(self._masked(run))
                    if len(found) >= limit:
                        return RunPage(found, cursor)
            if len(batch) < limit:
                return RunPage(found, None)
        return RunPage(found, cursor)

    def _visible(self, run: ActionRun, tenant_id: str, reader: Reader | None) -> bool:
        if run.tenant_id != tenant_id:
            return False
        return reader is None or may_read(run, reader, self._definition(run))

    def _definition(self, run: ActionRun) -> ActionDefinition | None:
        action = self._registry.resolve(run.action_id)
        return action.definition if action is not None else None

    def _masked(self, run: ActionRun) -> ActionRun:
        return masked_run(run, self._definition(run))

    def shown(self, outcome: ActionOutcome, run: ActionRun) -> ActionOutcome:
        """``outcome`` as a reader of ``run`` sees it: sensitive values masked."""
        return masked_outcome(outcome, self._definition(run))

    async def audit_trail(self, run_id: str, tenant_id: str) -> list[AuditEvent]:
        """The run's audit events in order; none when it does not exist in this tenant (every
        stored run has at least its proposal)."""
        if await self._ledger.load_in(run_id, tenant_id) is None:
            return []
        return await self._ledger.trail(run_id)

    async def limit_usage(
        self,
        action_id: str,
        tenant_id: str,
        *,
        principal_id: str | None = None,
        resource: str | None = None,
    ) -> list[LimitUsage] | None:
        """The current usage of ``action_id``'s limits for the given subject (limits per
        principal need ``principal_id``, per resource ``resource``); ``None``: no such action."""
        action = self._registry.resolve(action_id)
        if action is None:
            return None
        checks = [
            LimitCheck(
                spec,
                action_id,
                tenant_id,
                subject_of(spec, tenant_id, principal_id or "", resource),
            )
            for spec in action.definition.limits
            if (spec.per is not LimitSubject.PRINCIPAL or principal_id is not None)
            and (spec.per is not LimitSubject.RESOURCE or resource is not None)
        ]
        return await self._ledger.limit_usage(checks, self._clock.now())
