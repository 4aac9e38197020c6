"""``RunLedger``: the one owner of a run's durable writes and the reads they are decided on.

Owns: loading a run, creating it with its audit (and its duplicate reservation), the non-terminal
compare-and-set with its audit event, the terminal write with its duplicate completion and audit,
and "reload and answer the stored truth" after a lost race. Every write goes through
``Store.unit()`` here and nowhere else in the core, so each durable boundary commits the run, its
reservation and its audit together (see ``ports.py`` for what the store guarantees). A store that
takes whole units (``WholeUnits``) gets each write as one body it may run in one hop; the bodies
await only the unit's ports, and the callbacks they call (``on_duplicate``, ``on_limits``) are
plain computation.

Collaborators decide *what* to write; the ledger decides nothing about governance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from signoff.core.answers import outcome_of, terminal_status_for
from signoff.core.audit_events import AuditKind, event
from signoff.core.limit_stage import releases, releases_scope
from signoff.core.limits import LimitCheck, LimitDecision, LimitUsage, current_usage, reserve
from signoff.core.observe import NO_OBSERVER, RuntimeObserver
from signoff.core.ports import (
    AuditEvent,
    Clock,
    DuplicateEntry,
    Liveness,
    ReservingUnit,
    Settlement,
    SettlingUnit,
    Store,
    StoreUnit,
    WholeUnits,
    implements,
)
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, ApprovalState, DuplicateScope, RunStatus

MAX_CAS_ATTEMPTS = 64
"""How often a collaborator re-reads and re-applies after losing a compare-and-set."""

OnDuplicate = Callable[[DuplicateEntry], tuple[ActionRun, list[AuditEvent]]]
"""Given the entry that holds a scope already: the run and audit to record instead."""

OnLimits = Callable[[LimitDecision], tuple[ActionRun, list[AuditEvent]]]
"""Given the limits' decision (reservations held unless a deny limit is exceeded): the run and
audit to record."""

T = TypeVar("T")


class RunLedger:
    def __init__(self, store: Store, clock: Clock, observer: RuntimeObserver = NO_OBSERVER) -> None:
        self._store = store
        self._clock = clock
        self._observer = observer
        self._whole = store if isinstance(store, WholeUnits) else None

    async def _write(self, body: Callable[[StoreUnit], Awaitable[T]]) -> T:
        """One write unit: handed to the store whole when it takes whole units."""
        if self._whole is not None:
            return await self._whole.run_unit(body)
        async with self._store.unit() as unit:
            return await body(unit)

    # ------------------------------------------------------------------- reads
    async def load(self, run_id: str) -> ActionRun | None:
        """The stored run, in any tenant (the caller scopes it)."""
        async with self._store.unit() as unit:
            return await unit.runs.get(run_id)

    async def load_in(self, run_id: str, tenant_id: str | None) -> ActionRun | None:
        """The stored run if it belongs to ``tenant_id`` (``None``: trusted, any tenant)."""
        run = await self.load(run_id)
        if run is None or (tenant_id is not None and run.tenant_id != tenant_id):
            return None
        return run

    async def truth(self, run_id: str) -> ActionOutcome:
        """After a lost race: reload and answer what is stored, unchanged."""
        current = await self.load(run_id)
        assert current is not None, f"run {run_id} vanished"
        return outcome_of(current)

    async def runs(
        self,
        *,
        tenant_id: str | None = None,
        statuses: Sequence[RunStatus] | None = None,
        limit: int = 100,
        before_run_id: str | None = None,
        after_run_id: str | None = None,
        oldest_first: bool = False,
        principal_id: str | None = None,
        id_tail: str | None = None,
    ) -> list[ActionRun]:
        """Newest first (or oldest first); ``tenant_id=None`` only for housekeeping and recovery."""
        async with self._store.unit() as unit:
            return await unit.runs.list(
                tenant_id=tenant_id,
                statuses=statuses,
                limit=limit,
                before_run_id=before_run_id,
                after_run_id=after_run_id,
                oldest_first=oldest_first,
                principal_id=principal_id,
                id_tail=id_tail,
            )

    async def every(self, status: RunStatus, page: int) -> AsyncIterator[ActionRun]:
        """Every run of every tenant in ``status``, oldest first, read ``page`` at a time to the
        end (housekeeping: a flood of new runs never shields an old one)."""
        cursor: str | None = None
        while True:
            batch = await self.runs(
                statuses=[status], limit=page, after_run_id=cursor, oldest_first=True
            )
            for run in batch:
                cursor = run.run_id
                yield run
            if len(batch) < page:
                return

    async def trail(self, run_id: str) -> list[AuditEvent]:
        async with self._store.unit() as unit:
            return await unit.audit.list_for_run(run_id)

    async def wait_for_change(self, run_id: str, version: int, timeout: float) -> None:
        await self._store.wait_for_change(run_id, version, timeout)

    # ------------------------------------------------------------------ writes
    async def create(
        self,
        run: ActionRun,
        events: list[AuditEvent],
        *,
        scope: DuplicateScope | None = None,
        on_duplicate: OnDuplicate | None = None,
        limits: Sequence[LimitCheck] = (),
        on_limits: OnLimits | None = None,
    ) -> ActionRun:
        """Create ``run`` with its audit in one unit. With ``scope``, reserve it first; when another
        run holds it, record what ``on_duplicate`` answers instead. With ``limits`` (and a scope
        taken), reserve them next, atomically per subject, and record what ``on_limits`` answers;
        a run that answer ends gives its duplicate scope back. Returns the run recorded."""

        async def body(unit: StoreUnit) -> ActionRun:
            recorded, audit = run, events
            if scope is not None:
                if not limits and implements(unit, ReservingUnit):
                    reservation = await cast(ReservingUnit, unit).create_reserved(
                        scope, run, events
                    )
                    if reservation.accepted:
                        return run  # created with its audit
                else:
                    reservation = await unit.duplicates.reserve(
                        scope, run.run_id, run.input_hash, run.updated_at
                    )
                if not reservation.accepted:
                    assert reservation.existing is not None and on_duplicate is not None
                    recorded, audit = on_duplicate(reservation.existing)
                    await unit.runs.create(recorded)
                    await unit.audit.append(audit)
                    return recorded
            if limits:
                assert on_limits is not None
                decision = await reserve(unit.limits, limits, run.run_id, run.updated_at)
                recorded, audit = on_limits(decision)
                if recorded.is_terminal and scope is not None:
                    await unit.duplicates.release(scope, run.run_id)
            await unit.runs.create(recorded)
            await unit.audit.append(audit)
            return recorded

        return await self._write(body)

    async def cas(
        self,
        run: ActionRun,
        updated: ActionRun,
        kind: AuditKind,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
        limits: Sequence[LimitCheck] = (),
        on_limits: Callable[[LimitDecision], tuple[ActionRun, AuditKind]] | None = None,
    ) -> ActionRun | None:
        """A non-terminal compare-and-set and its audit event in one unit; ``None``: race lost.

        With ``limits``, the run's reservations are re-checked (and held) first in the same unit;
        ``on_limits`` may replace the update (a terminal one gives the scope and limits back)."""

        async def body(unit: StoreUnit) -> tuple[ActionRun | None, AuditKind]:
            wanted, audited = updated, kind
            if limits:
                assert on_limits is not None
                decision = await reserve(unit.limits, limits, run.run_id, updated.updated_at)
                wanted, audited = on_limits(decision)
            stored = await unit.runs.compare_and_set(run.version, wanted)
            if stored is not None and stored.is_terminal:
                assert stored.result is not None
                if run.duplicate_scope is not None and releases_scope(run, stored.status):
                    await unit.duplicates.release(run.duplicate_scope, run.run_id)
                elif run.duplicate_scope is not None:
                    await unit.duplicates.complete(
                        run.duplicate_scope, run.run_id, stored.result, wanted.updated_at
                    )
                if releases(run, stored.status):
                    await unit.limits.release(run.run_id)
            if stored is not None:
                await unit.audit.append(
                    [event(stored, audited, wanted.updated_at, actor=actor, **(data or {}))]
                )
            return stored, audited

        stored, audited = await self._write(body)
        if stored is None:
            self._observer.cas_conflict(str(audited))
        return stored

    async def terminal(
        self,
        run: ActionRun,
        result: ExecutionResult,
        kind: AuditKind,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
        approval: ApprovalState | None = None,
    ) -> ActionOutcome | None:
        """Commit a terminal result with its duplicate completion and audit, by compare-and-set.

        ``approval`` records the decision that ended the run. ``None`` means someone else wrote
        first; the caller re-reads and decides.
        """
        now = self._clock.now()
        status = terminal_status_for(result)
        final = (
            run.advance(status, now, result=result, approval=approval)
            if approval is not None
            else run.advance(status, now, result=result)
        )
        scope = run.duplicate_scope
        gives_back = scope if scope is not None and releases_scope(run, status) else None
        then = Settlement(
            at=now,
            events=lambda stored: [
                event(stored, kind, now, actor=actor, code=result.code, **(data or {}))
            ],
            complete=(scope, result) if scope is not None and gives_back is None else None,
            release_limits=releases(run, status),
            release_scope=gives_back,
        )

        async def body(unit: StoreUnit) -> ActionRun | None:
            if gives_back is None and implements(unit, SettlingUnit):
                return await cast(SettlingUnit, unit).settle(run.version, final, then)
            return await settle(unit, run.version, final, then)

        stored = await self._write(body)
        if stored is None:
            self._observer.cas_conflict(str(kind))
            return None
        return outcome_of(stored)

    async def finish(
        self,
        run: ActionRun,
        result: ExecutionResult,
        kind: AuditKind,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> ActionOutcome:
        """A terminal write that answers the stored truth, unchanged, when the race was lost."""
        outcome = await self.terminal(run, result, kind, actor=actor, data=data)
        return outcome if outcome is not None else await self.truth(run.run_id)

    async def note(
        self,
        run: ActionRun,
        kind: AuditKind,
        *,
        code: str | None = None,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Audit a fact about ``run`` that changes nothing in it (a retried attempt, a repair)."""
        now = self._clock.now()
        noted = [event(run, kind, now, actor=actor, code=code, **(data or {}))]

        async def body(unit: StoreUnit) -> None:
            await unit.audit.append(noted)

        await self._write(body)

    async def limit_usage(self, checks: Sequence[LimitCheck], now: datetime) -> list[LimitUsage]:
        """Each limit's current usage (no lock, nothing held)."""
        async with self._store.unit() as unit:
            return await current_usage(unit.limits, checks, now)

    async def purge_duplicates(self, older_than: datetime) -> int:
        """Forget COMPLETED duplicate entries finished before ``older_than`` (never RUNNING ones)."""
        async with self._store.unit() as unit:
            return await unit.duplicates.purge_completed(older_than)

    async def heartbeat(
        self, worker_id: str, now: datetime, revisions: Mapping[str, str] | None = None
    ) -> None:
        await self._store.workers.heartbeat(worker_id, now, revisions)

    async def revisions_held(self, action_id: str, since: datetime) -> set[str]:
        """The revisions of ``action_id`` held by incarnations seen since ``since`` and not
        known dead (a fleet mid-upgrade)."""
        held = await self._store.workers.revisions(action_id, since)
        if not held:
            return set()
        liveness = await self._store.workers.liveness(list(held))
        return {rev for worker, rev in held.items() if liveness.get(worker) is not Liveness.DEAD}

    async def last_seen(self, worker_ids: Sequence[str]) -> dict[str, datetime]:
        return await self._store.workers.last_seen(worker_ids)

    async def liveness(self, worker_ids: Sequence[str]) -> dict[str, Liveness]:
        return await self._store.workers.liveness(worker_ids)


async def settle(
    unit: StoreUnit, expected_version: int, run: ActionRun, then: Settlement
) -> ActionRun | None:
    """``SettlingUnit.settle`` through the unit's four ports, for a unit without it."""
    stored = await unit.runs.compare_and_set(expected_version, run)
    if stored is None:
        return None
    if then.complete is not None:
        scope, result = then.complete
        await unit.duplicates.complete(scope, run.run_id, result, then.at)
    if then.release_scope is not None:
        await unit.duplicates.release(then.release_scope, run.run_id)
    if then.release_limits:
        await unit.limits.release(run.run_id)
    await unit.audit.append(then.events(stored))
    return stored
