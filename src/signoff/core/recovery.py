"""``Recovery``: reconcile non-terminal runs by state, through the normal CAS transitions.

- WAITING_APPROVAL keeps waiting; overdue ones expire.
- WAITING_EXTERNAL keeps waiting; overdue ones follow the action's orphan policy.
- RUNNING runs whose holder is dead: background work never claimed for dispatch is dispatched
  now; an executor declared idempotent by operation id is re-dispatched with the same operation
  id; anything else may or may not have had its side effect and becomes
  FAILED / ACTION_INTERRUPTED / MANUAL_REVIEW.

Who holds a RUNNING run is recorded as ``worker_id`` = ``instance/incarnation``. A holder is dead
when it is an earlier life of this instance (run one live process per instance id), when the
operator names its instance, when the store knows at once that its process on this host is gone or
its database session has ended (``WorkerRegistry.liveness``), or, only where neither can be known,
when its heartbeat is older than ``worker_ttl``. A live holder's
work is never taken over. Recoverers race on compare-and-set; the winner becomes the holder and
heartbeats, so the others see a live holder and leave the run alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta

from signoff.core import admission
from signoff.core.approvals import Approvals
from signoff.core.audit_events import Actor, AuditKind
from signoff.core.codes import Code
from signoff.core.definition import ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.external import External
from signoff.core.ledger import RunLedger
from signoff.core.ports import Clock, Liveness
from signoff.core.registry import ActionRegistry
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, RunStatus

WORKER_TTL = timedelta(seconds=60)
HEARTBEAT_EVERY = 15.0


@dataclass
class RecoveryReport:
    expired: int = 0
    orphaned: int = 0
    redispatched: list[str] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)
    skipped: int = 0
    # Runs safe to repeat that this process left for a serving one (``redispatch=False``).
    handed_over: list[str] = field(default_factory=list)


class Recovery:
    """Owns crash recovery and this incarnation's heartbeat."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        approvals: Approvals,
        external: External,
        clock: Clock,
        instance_id: str,
        worker_ttl: timedelta = WORKER_TTL,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._approvals = approvals
        self._external = external
        self._clock = clock
        self._instance_id = instance_id
        self._worker_ttl = worker_ttl

    @property
    def _worker_id(self) -> str:
        return self._dispatcher.worker_id

    async def heartbeat(self) -> None:
        """Seen alive now, with the definition revisions this incarnation holds."""
        held = {action.id: action.revision for action in self._registry.all()}
        await self._ledger.heartbeat(self._worker_id, self._clock.now(), held)

    async def heartbeat_forever(self, every: float = HEARTBEAT_EVERY) -> None:
        """Keep this incarnation visibly alive (the server runs it in the background)."""
        while True:
            await self.heartbeat()
            await asyncio.sleep(every)

    async def recover(
        self, instance_id: str | None = None, limit: int = 10_000, *, redispatch: bool = True
    ) -> RecoveryReport:
        """Reconcile after a crash: at every server start and by ``signoff recover``.

        ``instance_id`` is the operator's word that this instance is down: all of its runs count
        as abandoned. Without it, only dead holders (see the module docstring) are recovered.
        ``redispatch=False`` (``signoff recover``, a process that serves nothing) reconciles state
        only: a run safe to repeat is released to the next serving process's housekeeping
        instead of being executed here, and orphaned external work (whose policy may call a
        cancel hook) is left to it too.
        """
        await self.heartbeat()
        expired = await self._approvals.expire_overdue(limit)
        orphaned = await self._external.sweep(limit) if redispatch else 0
        report = await self.recover_running(instance_id, limit, redispatch=redispatch)
        report.expired, report.orphaned = expired, orphaned
        return report

    async def recover_running(
        self, instance_id: str | None = None, limit: int = 10_000, *, redispatch: bool = True
    ) -> RecoveryReport:
        """Reconcile RUNNING runs whose holder is dead; the maintenance loop calls it too."""
        pulse = asyncio.get_running_loop().create_task(self.heartbeat_forever())
        try:
            report = RecoveryReport()
            running = await self._ledger.runs(statuses=[RunStatus.RUNNING], limit=limit)
            dead = await self._dead_holders(running, instance_id)
            for run in running:
                if run.worker_id in dead:
                    await self._recover_running(run, report, redispatch)
                else:
                    report.skipped += 1
            return report
        finally:
            pulse.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pulse

    async def _dead_holders(self, runs: list[ActionRun], named: str | None) -> set[str | None]:
        holders = {run.worker_id for run in runs}
        dead: set[str | None] = {None} if None in holders else set()
        unknown: list[str] = []
        for holder in holders - {None, self._worker_id}:
            assert holder is not None
            instance = holder.rpartition("/")[0]
            if instance in (named, self._instance_id):
                dead.add(holder)
            else:
                unknown.append(holder)
        known = await self._ledger.liveness(unknown)
        dead.update(h for h in unknown if known.get(h) is Liveness.DEAD)
        # Only where neither the process nor the database session can be observed does the
        # heartbeat's age decide (another host, a holder from before liveness was recorded).
        undecided = [h for h in unknown if known.get(h, Liveness.UNKNOWN) is Liveness.UNKNOWN]
        seen = await self._ledger.last_seen(undecided)
        cutoff = self._clock.now() - self._worker_ttl
        dead.update(h for h in undecided if h not in seen or seen[h] < cutoff)
        return dead

    async def _recover_running(
        self, run: ActionRun, report: RecoveryReport, redispatch: bool = True
    ) -> None:
        action = self._registry.resolve(run.action_id)
        never_started = run.executor_mode == ExecutorMode.ASYNC and run.dispatched_at is None
        if action is None or not (never_started or action.definition.executor_idempotent):
            failure = ExecutionResult.manual_review_failure(
                Code.ACTION_INTERRUPTED,
                "signoff stopped while the action ran; its side effect may or may not have happened.",
            )
            if await self._ledger.terminal(
                run, failure, AuditKind.RECOVERED_INTERRUPTED, actor=Actor.RECOVERY
            ):
                report.interrupted.append(run.run_id)
            return
        refusal = admission.recheck(action, run, self._clock.now())
        if refusal is not None:
            if not never_started:  # the effect may already have happened before the crash
                refusal = ExecutionResult.manual_review_failure(refusal.code, refusal.message)
            await self._ledger.terminal(
                run, refusal, AuditKind.RECOVERY_REFUSED, actor=Actor.RECOVERY
            )
            return
        if not redispatch:
            await self._hand_over(run, report)
            return
        claimed = self._dispatcher.claim(run, self._clock.now())
        stored = await self._ledger.cas(
            run,
            claimed,
            AuditKind.RECOVERY_REDISPATCH,
            actor=Actor.RECOVERY,
            data={"operation_id": run.operation_id, "previous_holder": run.worker_id},
        )
        if stored is None:  # another recoverer or a completion got there first
            return
        report.redispatched.append(run.run_id)
        await self._dispatcher.execute(action, stored)

    async def _hand_over(self, run: ActionRun, report: RecoveryReport) -> None:
        """Release a dead holder's run to whichever serving process recovers next: no holder
        reads as dead everywhere, so its housekeeping re-dispatches it (same operation id)."""
        if run.worker_id is None:
            report.handed_over.append(run.run_id)
            return
        released = run.advance(RunStatus.RUNNING, self._clock.now(), worker_id=None)
        stored = await self._ledger.cas(
            run,
            released,
            AuditKind.RECOVERY_HANDED_OVER,
            actor=Actor.RECOVERY,
            data={"operation_id": run.operation_id, "previous_holder": run.worker_id},
        )
        if stored is not None:
            report.handed_over.append(run.run_id)
