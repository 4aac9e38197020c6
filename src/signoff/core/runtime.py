"""``Runtime``: the one narrow facade every surface uses.

Governed operations — propose, decide, cancel, complete, recover and the housekeeping chores
(expire, sweep, heartbeat) — and reads scoped to a tenant (get, wait, list, audit trail, the
registered actions). Nothing on it can change a run except through a governed operation: the
commit machinery lives in the collaborators it composes and is not reachable from here.

    Runtime ──> Pipeline · Approvals · External · Cancellation · Recovery
                    └───────── RunLedger (durable writes) · Dispatcher (guard once, then execute)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from signoff.core.answers import not_found
from signoff.core.approvals import Approvals, DecisionRequest, DecisionResult
from signoff.core.background import Background, Notifications
from signoff.core.cancellation import Cancellation
from signoff.core.clock import SystemClock, new_token
from signoff.core.codes import Code
from signoff.core.confirmation import Confirmations
from signoff.core.confirmer import ConfirmationAnswer, ConfirmationRequest, Confirmer
from signoff.core.dispatch import AsyncLane
from signoff.core.dispatcher import Dispatcher
from signoff.core.external import CompletionResult, External
from signoff.core.identity import Principal
from signoff.core.input_limits import DEFAULT_LIMITS, InputLimits
from signoff.core.ledger import RunLedger
from signoff.core.limits import LimitUsage
from signoff.core.observe import NO_OBSERVER, DecisionReport, RuntimeObserver, call_report
from signoff.core.pipeline import Pipeline
from signoff.core.ports import AuditEvent, Clock, Notifier, Store
from signoff.core.proposal import ActionProposal
from signoff.core.reads import IdMatch, RunPage, RunReads
from signoff.core.recovery import WORKER_TTL, Recovery, RecoveryReport
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.repair import Repair, RepairRequest
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.retry import Sleeper
from signoff.core.run import ActionRun, RunStatus
from signoff.core.visibility import Reader, approver_may_address, masked_outcome

__all__ = [
    "DEFAULT_PENDING_PER_PRINCIPAL",
    "DecisionRequest",
    "DecisionResult",
    "RepairRequest",
    "RunPage",
    "Runtime",
]

log = logging.getLogger("signoff.shutdown")

DEFAULT_PENDING_PER_PRINCIPAL = 100
"""How many of one principal's requests may wait for approval at once (contract §9)."""


class Runtime:
    def __init__(
        self,
        registry: ActionRegistry,
        store: Store,
        clock: Clock | None = None,
        lane: AsyncLane | None = None,
        instance_id: str = "default",
        notifier: Notifier | None = None,
        worker_ttl: timedelta = WORKER_TTL,
        input_limits: InputLimits = DEFAULT_LIMITS,
        sleep: Sleeper = asyncio.sleep,
        observer: RuntimeObserver | None = None,
        pending_per_principal: int | None = DEFAULT_PENDING_PER_PRINCIPAL,
    ) -> None:
        self._observer: RuntimeObserver = observer if observer is not None else NO_OBSERVER
        self._registry = registry
        self._clock: Clock = clock or SystemClock()
        self._instance_id = instance_id
        # One incarnation per process life: ``worker_id`` says which life holds a RUNNING run.
        self._worker_id = f"{instance_id}/{new_token()}"
        self._background = Background()
        self._ledger = RunLedger(store, self._clock, self._observer)
        self._notifications = Notifications(self._background, self._ledger, notifier)
        # ``sleep`` waits between in-run retries (``retry.py``); tests inject one that never sleeps.
        self._dispatcher = Dispatcher(
            self._ledger, self._clock, self._worker_id, lane, sleep, observer=self._observer
        )
        stage = (registry, self._ledger, self._dispatcher, self._notifications, self._clock)
        self._approvals = Approvals(*stage, fleet_ttl=worker_ttl)
        self._confirmations = Confirmations(*stage, expire=self._approvals.expire,
                                           shield=self._background.shield)  # fmt: skip
        self._pipeline = Pipeline(*stage, input_limits, self._observer,
                                  pending_per_principal=pending_per_principal,
                                  confirmations=self._confirmations)  # fmt: skip
        self._external = External(registry, self._ledger, self._clock)
        self._cancellation = Cancellation(self._ledger, self._approvals, self._external)
        self._repair = Repair(
            registry, self._ledger, self._approvals, self._clock, self._notifications
        )
        self._reads = RunReads(registry, self._ledger, self._approvals, self._clock)
        self._recovery = Recovery(
            registry,
            self._ledger,
            self._dispatcher,
            self._approvals,
            self._external,
            self._clock,
            instance_id,
            worker_ttl,
        )

    # ---------------------------------------------------------------- identity
    @property
    def instance_id(self) -> str:
        return self._instance_id

    @property
    def worker_id(self) -> str:
        """``instance/incarnation``: this process life, as recorded on the runs it holds."""
        return self._worker_id

    def now(self) -> datetime:
        """The runtime's clock (surfaces show times relative to it)."""
        return self._clock.now()

    # ------------------------------------------------------- governed operations
    # Each finishes its durable steps even if the caller goes away (a client hanging up).
    async def propose(self, proposal: ActionProposal, confirmer: Confirmer | None = None
                      ) -> ActionOutcome:  # fmt: skip
        """Govern one proposal (``pipeline.py``; ``confirmer`` asks the requester's human); the
        observer hears how it was answered, and sensitive output values come back masked."""
        started = time.perf_counter()
        outcome = await self._background.shield(self._pipeline.propose(proposal, confirmer))
        action = self._registry.resolve(proposal.action_id)
        elapsed = time.perf_counter() - started
        self._observer.call_finished(call_report(proposal, outcome, elapsed, action))
        return masked_outcome(outcome, action.definition if action is not None else None)

    async def confirm(self, run_id: str, tenant_id: str, principal: Principal,
                      answer: ConfirmationAnswer, shown: str | None = None) -> ActionOutcome:  # fmt: skip
        """The requester's answer to its run's pending confirmation (``confirmation.py``)."""
        return await self._confirmations.answer(run_id, tenant_id, principal, answer, shown)

    async def confirmation_request(self, run_id: str, tenant_id: str, principal: Principal
                                   ) -> ConfirmationRequest | None:  # fmt: skip
        """What ``principal`` is shown to confirm its pending run (masked), or ``None``."""
        return await self._confirmations.pending(run_id, tenant_id, principal)

    async def decide(
        self, run_id: str, tenant_id: str, request: DecisionRequest, *, reader: Reader | None = None
    ) -> DecisionResult:
        """Record one approver's decision; the last needed approval resumes the run. With a
        ``reader`` (the approver's surface) a run outside its domain answers like a missing one."""
        if reader is not None:
            run = await self._ledger.load_in(run_id, tenant_id)
            if run is None or not approver_may_address(run, reader.principal):
                return DecisionResult(Code.ACTION_RUN_NOT_FOUND, None, accepted=False)
        started = time.perf_counter()
        with self._observer.stage("approval", run_id, "") as deciding:
            result = await self._background.shield(
                self._approvals.decide(run_id, tenant_id, request)
            )
            action_id = result.outcome.action if result.outcome is not None else ""
            deciding.set(code=result.code, accepted=result.accepted, action=action_id)
        await self._report_decision(run_id, tenant_id, request, result, started)
        if result.outcome is None:
            return result
        action = self._registry.resolve(result.outcome.action)
        shown = masked_outcome(result.outcome, action.definition if action is not None else None)
        return DecisionResult(result.code, shown, result.accepted)

    async def _report_decision(self, run_id: str, tenant_id: str, request: DecisionRequest,
                               result: DecisionResult, started: float) -> None:  # fmt: skip
        outcome = result.outcome
        waited: float | None = None
        if result.accepted and outcome is not None and outcome.approval is None:
            # This decision settled the run: how long it had waited for approval.
            settled = await self._ledger.load(run_id)
            if settled is not None and settled.approval is not None:
                waited = (self._clock.now() - settled.approval.requested_at).total_seconds()
        self._observer.decision(
            DecisionReport(
                run_id=run_id,
                tenant_id=tenant_id,
                action=outcome.action if outcome is not None else "",
                registered=outcome is not None
                and self._registry.resolve(outcome.action) is not None,
                approver=request.approver.id,
                vote=str(request.vote),
                code=str(result.code),
                accepted=result.accepted,
                status=str(outcome.status) if outcome is not None else "",
                duration_s=time.perf_counter() - started,
                waited_s=waited,
            )
        )

    async def cancel(
        self, run_id: str, tenant_id: str, principal: Principal, *, reader: Reader | None = None
    ) -> ActionOutcome:
        """Cancel before dispatch, or external work through its cancel hook. A running synchronous
        run is never reported cancelled. A run ``reader`` may not see answers like a missing one."""
        if reader is not None and await self.get_run(run_id, tenant_id, reader=reader) is None:
            return not_found(run_id)
        outcome = await self._background.shield(
            self._cancellation.cancel(run_id, tenant_id, principal)
        )
        run = await self._ledger.load_in(run_id, tenant_id)
        return self._reads.shown(outcome, run) if run is not None else outcome

    async def complete(
        self,
        run_id: str,
        attempt_token: str,
        result: ExecutionResult,
        *,
        tenant_id: str | None = None,
    ) -> CompletionResult:
        """Record the external system's final result for the matching attempt.

        ``tenant_id`` comes from an authenticated callback; ``None`` is for trusted in-process
        integrations. A repeated completion answers the stored result; a stale token is refused.
        """
        return await self._background.shield(
            self._external.complete(run_id, attempt_token, result, tenant_id)
        )

    # ------------------------------------------------------------------- reads
    # Scoped to a tenant and, with a ``reader`` (every surface), to what it may see (``reads.py``).
    async def get(
        self, run_id: str, tenant_id: str, *, reader: Reader | None = None
    ) -> ActionOutcome | None:
        """The run's outcome, or ``None`` when it does not exist in this tenant (never disclosed)."""
        return await self._reads.get(run_id, tenant_id, reader=reader)

    async def get_run(
        self, run_id: str, tenant_id: str, *, reader: Reader | None = None
    ) -> ActionRun | None:
        """The stored run in this tenant; an approval past its deadline reads as expired."""
        return await self._reads.get_run(run_id, tenant_id, reader=reader)

    async def resolve_id(
        self, given: str, tenant_id: str, *, reader: Reader | None = None
    ) -> IdMatch:
        """The run a person's id (whole, or a start of its random tail) names, among the runs
        ``reader`` may see (``core.short_ids``)."""
        return await self._reads.resolve_id(given, tenant_id, reader=reader)

    async def wait(
        self, run_id: str, tenant_id: str, timeout: float, *, reader: Reader | None = None
    ) -> ActionOutcome | None:
        """Long-poll: return once the run changes or reaches a final state, or at ``timeout``."""
        return await self._reads.wait(run_id, tenant_id, timeout, reader=reader)

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
        """One page of the tenant's stored runs, unscoped (operator tools)."""
        return await self._reads.list_runs(
            tenant_id,
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
        """Up to ``limit`` runs ``reader`` may see (masked); ``RunPage.cursor`` continues."""
        return await self._reads.page_runs(
            tenant_id,
            reader,
            statuses=statuses,
            limit=limit,
            cursor=cursor,
            oldest_first=oldest_first,
            scan_pages=scan_pages,
        )

    async def audit_trail(self, run_id: str, tenant_id: str) -> list[AuditEvent]:
        """The run's audit events in order; none when it does not exist in this tenant."""
        return await self._reads.audit_trail(run_id, tenant_id)

    async def limit_usage(
        self,
        action_id: str,
        tenant_id: str,
        *,
        principal_id: str | None = None,
        resource: str | None = None,
    ) -> list[LimitUsage] | None:
        """The current usage of ``action_id``'s limits for a subject; ``None``: no such action."""
        return await self._reads.limit_usage(
            action_id, tenant_id, principal_id=principal_id, resource=resource
        )

    def action(self, action_id: str) -> CompiledAction | None:
        """The registered action by id, as currently loaded."""
        return self._registry.resolve(action_id)

    def action_for_tool(self, name: str) -> CompiledAction | None:
        """The registered action whose MCP tool name is ``name``."""
        return self._registry.resolve_tool(name)

    def actions(self) -> list[CompiledAction]:
        """Every registered action, sorted by id."""
        return self._registry.all()

    @staticmethod
    def not_found(run_id: str) -> ActionOutcome:
        return not_found(run_id)

    async def redispatch(
        self, run_id: str, tenant_id: str, request: RepairRequest
    ) -> ActionOutcome:
        """An operator re-dispatches a MANUAL_REVIEW run of an idempotent executor with the same
        operation id, as a new linked run through the governed path (``repair.py``)."""
        return await self._background.shield(self._repair.redispatch(run_id, tenant_id, request))

    # ------------------------------------------------------- recovery, housekeeping
    async def recover(
        self, instance_id: str | None = None, limit: int = 10_000, *, redispatch: bool = True
    ) -> RecoveryReport:
        """Reconcile after a crash (``recovery.py``): at every server start and by ``signoff
        recover``; ``instance_id`` is the operator's word that that instance is down."""
        return await self._recovery.recover(instance_id, limit, redispatch=redispatch)

    async def recover_running(self, limit: int = 10_000) -> RecoveryReport:
        """Reconcile RUNNING runs whose holder is dead (the housekeeping loop)."""
        return await self._recovery.recover_running(None, limit)

    async def expire_overdue(self, limit: int = 1000) -> int:
        """Move every overdue approval to EXPIRED; returns how many moved."""
        return await self._approvals.expire_overdue(limit)

    async def dispatch_approved(self, limit: int = 200) -> int:
        """Resume runs approved without dispatch (CLI decisions) in this serving process."""
        return await self._background.shield(self._approvals.dispatch_approved(limit))

    async def sweep_external(self, limit: int = 1000) -> int:
        """Apply the orphan policy to deferred runs past their deadline; returns how many."""
        return await self._external.sweep(limit)

    async def purge_duplicates(self, retention: timedelta) -> int:
        """Forget completed duplicate results kept longer than ``retention``: after that the
        same key runs again instead of replaying. Returns how many were forgotten."""
        return await self._ledger.purge_duplicates(self._clock.now() - retention)

    async def heartbeat(self) -> None:
        """Keep this incarnation visibly alive for other instances' recovery."""
        await self._recovery.heartbeat()

    def background_usage(self) -> tuple[int, int]:
        """(background work running or queued, how much is taken) in this process (metrics)."""
        return self._dispatcher.lane_usage()

    async def drain(self) -> None:
        """Wait for shielded calls and background work to finish (tests, shutdown)."""
        await self._background.drain()
        await self._dispatcher.drain()

    async def shutdown(self, grace: float) -> None:
        """End this process's work within ``grace`` seconds (SIGTERM): background work that has
        not started never starts here — its run is committed, so the next process's recovery
        dispatches it — and whatever is still running when the grace is over is cut off, as a
        crash would cut it (recovery decides what its run becomes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(grace, 0.0)
        dropped, cut = await self._dispatcher.stop_background(grace)
        cut += await self._background.settle(deadline - loop.time())
        if dropped or cut:
            log.warning(
                "shutdown: %d queued background run(s) left for the next process, "
                "%d cut off after the grace",
                dropped,
                cut,
                extra={"queued_left": dropped, "cut_off": cut, "grace_s": grace},
            )
