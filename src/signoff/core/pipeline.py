"""The governed pipeline: one path from proposal to durable result (contract §3).

New proposal::

    create run -> resolve -> validate -> policy -> reserve duplicate scope
      -> [approval required: WAITING_APPROVAL, return]
      -> guard -> dispatch -> persist result + audit

Stages between two durable boundaries are evaluated in memory and committed together with their
audit events, so a synchronous call commits twice: once before the side effect (run in RUNNING with
a fresh attempt token, the reservation, the audit so far) and once after (result, completion, audit).
Approval resume re-resolves, re-validates and re-evaluates policy, never reserves again, and runs
the guard immediately before dispatch (see ``approvals.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from signoff.core.clock import SystemClock, new_run_id, new_token
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.compiled import ActionRegistry, CompiledAction, validate_input
from signoff.core.definition import DuplicateVisibility, ExecutorMode, KeyRequirement
from signoff.core.dispatch import AsyncLane, run_executor, run_guard, shielded
from signoff.core.identity import is_valid_idempotency_key
from signoff.core.outcomes import event, outcome_of, terminal_status_for
from signoff.core.policy import PolicyInput, evaluate_policy
from signoff.core.ports import AuditEvent, Clock, DuplicateEntry, DuplicateState, Notifier, Store
from signoff.core.proposal import ActionProposal, canonical_hash
from signoff.core.results import ActionOutcome, ExecutionContext, ExecutionResult
from signoff.core.run import ActionRun, ApprovalState, DuplicateScope, RunStatus

MAX_CAS_ATTEMPTS = 64
log = logging.getLogger("signoff")


async def _quietly(call: Coroutine[Any, Any, None]) -> None:
    try:
        await call
    except Exception:
        log.exception("notification failed; the run is unaffected")


class Pipeline:
    """Shared machinery of the governed path; ``Runtime`` adds approvals and cancellation."""

    def __init__(
        self,
        registry: ActionRegistry,
        store: Store,
        clock: Clock | None = None,
        lane: AsyncLane | None = None,
        instance_id: str = "default",
        notifier: Notifier | None = None,
    ) -> None:
        self.registry = registry
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.instance_id = instance_id
        # One incarnation per process life: ``worker_id`` says which life holds a RUNNING run.
        self.incarnation = new_token()
        self.worker_id = f"{instance_id}/{self.incarnation}"
        self._lane = lane
        self.notifier = notifier
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def lane(self) -> AsyncLane:
        if self._lane is None:
            self._lane = AsyncLane()
        return self._lane

    # ----------------------------------------------------------------- proposal
    async def propose(self, proposal: ActionProposal) -> ActionOutcome:
        """Govern one proposal. Finishes its durable steps even if the caller goes away.

        If signoff itself fails (a store outage), the answer is ``ACTION_RUNTIME_FAILED`` /
        ``MANUAL_REVIEW`` with the run id: the run may or may not have been recorded, and a run
        left RUNNING is settled by recovery.
        """
        run_id = new_run_id()
        try:
            return await shielded(self._propose(proposal, run_id), self._tasks)
        except Exception:
            log.exception("run %s: signoff failed while governing %s", run_id, proposal.action_id)
            return ActionOutcome(
                run_id=run_id,
                action=proposal.action_id,
                status=ExecutionStatus.FAILED,
                code=Code.ACTION_RUNTIME_FAILED,
                retry=RetryDisposition.MANUAL_REVIEW,
                message="signoff could not finish recording this request; check "
                "signoff_get_run before retrying with the same idempotency_key.",
            )

    async def _propose(self, proposal: ActionProposal, run_id: str) -> ActionOutcome:
        now = self.clock.now()
        data = proposal.input if isinstance(proposal.input, dict) else {}
        run = ActionRun(
            run_id=run_id,
            tenant_id=proposal.tenant_id,
            action_id=proposal.action_id,
            principal=proposal.principal,
            channel=proposal.channel,
            proposer_type=proposal.proposer_type,
            idempotency_key=proposal.idempotency_key,
            input=data,
            created_at=now,
            updated_at=now,
        )
        events = [
            event(
                run,
                "proposed",
                now,
                channel=str(proposal.channel),
                proposer_type=str(proposal.proposer_type),
                roles=list(proposal.principal.roles),
            )
        ]

        action = self.registry.resolve(proposal.action_id)
        if action is None:
            return await self._refuse_new(
                run,
                events,
                ExecutionResult.invalid(
                    Code.ACTION_NOT_REGISTERED, f"No action {proposal.action_id!r} is registered."
                ),
            )
        run = run.advance(RunStatus.VALIDATING, now, executor_mode=str(action.definition.mode))
        events.append(event(run, "resolved", now, revision=action.revision))

        refusal = self._check_key(action, proposal.idempotency_key)
        if refusal is None:
            refusal = self._validate(action, proposal.input)
        if refusal is not None:
            return await self._refuse_new(run, events, refusal)
        run = run.advance(RunStatus.POLICY_EVALUATED, now, input_hash=canonical_hash(data))

        decision = evaluate_policy(action, self._policy_input(run, now))
        if decision.denial is not None:
            return await self._refuse_new(run, events, decision.denial)
        run = run.model_copy(update={"resource": decision.resource})
        events.append(
            event(run, "policy_allowed", now, approval_required=decision.approval_required)
        )

        scope = self._scope(action, run)
        mode = action.definition.mode
        needs_lane = mode is ExecutorMode.ASYNC and not decision.approval_required
        if needs_lane and not self.lane.try_acquire():
            return await self._refuse_new(
                run,
                events,
                ExecutionResult.retryable_failure(
                    Code.ACTION_LANE_FULL, "Too much background work in progress; retry later."
                ),
            )
        try:
            async with self.store.unit() as unit:
                if scope is not None:
                    reservation = await unit.duplicates.reserve(
                        scope, run.run_id, run.input_hash, now
                    )
                    if not reservation.accepted:
                        assert reservation.existing is not None
                        run = self._duplicate_answer(run, reservation.existing, now)
                        code = run.result.code if run.result else None
                        events.append(event(run, "duplicate", now, code=code))
                        await unit.runs.create(run)
                        await unit.audit.append(events)
                        if needs_lane:
                            self.lane.release_slot()
                            needs_lane = False
                        return outcome_of(run)
                    events.append(event(run, "reserved", now, scope=scope.visibility))
                if decision.approval_required:
                    run = run.advance(
                        RunStatus.WAITING_APPROVAL,
                        now,
                        duplicate_scope=scope,
                        approval=self._approval_state(action, now),
                    )
                    events.append(
                        event(run, "approval_requested", now, code=Code.APPROVAL_REQUIRED)
                    )
                else:
                    run = self._start_attempt(run, now, duplicate_scope=scope)
                    events.append(event(run, "dispatching", now, attempt=run.attempt))
                await unit.runs.create(run)
                await unit.audit.append(events)
        except BaseException:
            if needs_lane:
                self.lane.release_slot()
            raise
        if run.status is RunStatus.WAITING_APPROVAL:
            self._on_approval_requested(run)
            return outcome_of(run)
        return await self.dispatch(action, run)

    def _on_approval_requested(self, run: ActionRun) -> None:
        if self.notifier is not None:
            self.notify(self.notifier.approval_requested(run))

    def notify(self, call: Coroutine[Any, Any, None]) -> None:
        """Run a notification in the background; its failure is logged, never raised."""
        task = asyncio.get_running_loop().create_task(_quietly(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _check_key(self, action: CompiledAction, key: str | None) -> ExecutionResult | None:
        if key is None:
            if action.definition.idempotency.key is KeyRequirement.REQUIRED:
                return ExecutionResult.invalid(
                    Code.IDEMPOTENCY_KEY_REQUIRED,
                    f"{action.id} requires an idempotency_key; reuse it when retrying.",
                )
            return None
        if not is_valid_idempotency_key(key):
            return ExecutionResult.invalid(
                Code.IDEMPOTENCY_KEY_INVALID,
                "idempotency_key must be 1-255 printable ASCII characters.",
            )
        return None

    @staticmethod
    def _validate(action: CompiledAction, data: Any) -> ExecutionResult | None:
        errors = validate_input(action, data)
        if not errors:
            return None
        first = errors[0]
        return ExecutionResult.invalid(
            Code.INPUT_VALIDATION_FAILED, f"{first['path']}: {first['message']}"
        ).model_copy(update={"output": {"errors": errors}})

    def recheck(self, action: CompiledAction, run: ActionRun) -> ExecutionResult | None:
        """Validate the stored input and evaluate the *current* policy again (resume, recovery)."""
        invalid = self._validate(action, run.input)
        if invalid is not None:
            return invalid
        decision = evaluate_policy(action, self._policy_input(run, self.clock.now()))
        if decision.denial is not None:
            return ExecutionResult.denied(
                Code.POLICY_REVALIDATION_DENIED,
                f"Current policy refuses it ({decision.denial.code}): {decision.denial.message}",
            ).model_copy(update={"output": {"policy_code": decision.denial.code}})
        if decision.resource != run.resource:
            return ExecutionResult.denied(
                Code.POLICY_REVALIDATION_DENIED, "The resource identity changed."
            )
        return None

    @staticmethod
    def _policy_input(run: ActionRun, now: Any) -> PolicyInput:
        return PolicyInput(
            principal=run.principal,
            tenant_id=run.tenant_id,
            proposer_type=run.proposer_type,
            channel=run.channel,
            input=run.input,
            now=now,
        )

    @staticmethod
    def _scope(action: CompiledAction, run: ActionRun) -> DuplicateScope | None:
        if run.idempotency_key is None:
            return None
        visibility = action.definition.idempotency.scope
        if visibility is DuplicateVisibility.PRINCIPAL:
            value = f"principal:{run.principal.id}"
        elif visibility is DuplicateVisibility.RESOURCE:
            value = f"resource:{run.resource}"
        else:
            value = "*"
        return DuplicateScope(
            tenant_id=run.tenant_id,
            action_id=run.action_id,
            idempotency_key=run.idempotency_key,
            visibility=value,
        )

    @staticmethod
    def _approval_state(action: CompiledAction, now: Any) -> ApprovalState:
        spec = action.definition.approval
        return ApprovalState(
            approval_id=new_token(),
            approver_roles=spec.approver_roles,
            count=spec.count,
            requested_at=now,
            expires_at=now + spec.expires_after if spec.expires_after is not None else None,
        )

    def _start_attempt(self, run: ActionRun, now: Any, **changes: Any) -> ActionRun:
        return run.advance(
            RunStatus.RUNNING,
            now,
            attempt=run.attempt + 1,
            attempt_token=new_token(),
            worker_id=self.worker_id,
            **changes,
        )

    @staticmethod
    def _duplicate_answer(run: ActionRun, existing: DuplicateEntry, now: Any) -> ActionRun:
        """Same key seen before: reused with other input, still in progress, or replay its result."""
        if existing.input_hash != run.input_hash:
            result = ExecutionResult.invalid(
                Code.IDEMPOTENCY_KEY_REUSED,
                "This idempotency_key was used with a different input; use a new key.",
            )
            return run.advance(terminal_status_for(result), now, result=result)
        if existing.state is DuplicateState.RUNNING or existing.result is None:
            result = ExecutionResult.denied(
                Code.DUPLICATE_IN_PROGRESS,
                "A request with this idempotency_key is in progress; poll the original run.",
                retry=RetryDisposition.AFTER_BACKOFF,
            )
            return run.advance(
                terminal_status_for(result), now, result=result, duplicate_of=existing.owner_run_id
            )
        return run.advance(
            terminal_status_for(existing.result),
            now,
            result=existing.result,
            duplicate_of=existing.owner_run_id,
        )

    async def _refuse_new(
        self, run: ActionRun, events: list[AuditEvent], result: ExecutionResult
    ) -> ActionOutcome:
        """Record a proposal refused before reservation: one commit, nothing reserved."""
        now = self.clock.now()
        run = run.advance(terminal_status_for(result), now, result=result)
        events.append(event(run, "refused", now, code=result.code))
        async with self.store.unit() as unit:
            await unit.runs.create(run)
            await unit.audit.append(events)
        return outcome_of(run)

    # ----------------------------------------------------------------- dispatch
    def context_for(self, run: ActionRun) -> ExecutionContext:
        assert run.attempt_token is not None
        return ExecutionContext(
            run_id=run.run_id,
            action_id=run.action_id,
            tenant_id=run.tenant_id,
            principal=run.principal,
            input=run.input,
            resource=run.resource,
            attempt_token=run.attempt_token,
            operation_id=f"{run.run_id}:{run.attempt_token}",
        )

    async def dispatch(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        """``run`` is committed RUNNING. Sync: guard + executor now. Async: the lane does it."""
        if action.definition.mode is ExecutorMode.ASYNC:
            self.lane.submit(lambda: self._claim_then_execute(action, run))
            return outcome_of(run)
        return await self._guard_execute_record(action, run)

    async def _claim_then_execute(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        """Queued work may be cancelled until it is claimed; the claim is a CAS, so never both."""
        now = self.clock.now()
        claimed = run.advance(RunStatus.RUNNING, now, dispatched_at=now, worker_id=self.worker_id)
        stored = await self.cas_with_audit(run, claimed, "dispatch_claimed")
        if stored is None:
            current = await self.load(run.run_id)
            assert current is not None
            return outcome_of(current)
        return await self._guard_execute_record(action, stored)

    async def _guard_execute_record(self, action: CompiledAction, run: ActionRun) -> ActionOutcome:
        context = self.context_for(run)
        guard = await run_guard(action, context)
        if not guard.allowed:
            result = ExecutionResult.denied(guard.code, guard.message or "Refused by the guard.")
            return await self.finish(run, result, "guard_denied")
        result = await run_executor(action, context)
        return await self.finish(run, result, "executed")

    async def finish(
        self,
        run: ActionRun,
        result: ExecutionResult,
        kind: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
        **changes: Any,
    ) -> ActionOutcome:
        """Commit a terminal result; on a lost race answer the stored truth, unchanged."""
        outcome = await self.terminal_cas(run, result, kind, actor=actor, data=data, **changes)
        if outcome is not None:
            return outcome
        current = await self.load(run.run_id)
        assert current is not None
        return outcome_of(current)

    async def terminal_cas(
        self,
        run: ActionRun,
        result: ExecutionResult,
        kind: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
        **changes: Any,
    ) -> ActionOutcome | None:
        """Commit a terminal result with its duplicate completion and audit, by compare-and-set.

        ``None`` means someone else wrote first; the caller re-reads and decides.
        """
        now = self.clock.now()
        final = run.advance(terminal_status_for(result), now, result=result, **changes)
        async with self.store.unit() as unit:
            stored = await unit.runs.compare_and_set(run.version, final)
            if stored is None:
                return None
            if run.duplicate_scope is not None:
                await unit.duplicates.complete(run.duplicate_scope, run.run_id, result, now)
            await unit.audit.append(
                [event(stored, kind, now, actor=actor, code=result.code, **(data or {}))]
            )
        return outcome_of(stored)

    async def cas_with_audit(
        self,
        run: ActionRun,
        updated: ActionRun,
        kind: str,
        *,
        actor: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> ActionRun | None:
        """A non-terminal compare-and-set and its audit event in one unit."""
        async with self.store.unit() as unit:
            stored = await unit.runs.compare_and_set(run.version, updated)
            if stored is not None:
                await unit.audit.append(
                    [event(stored, kind, updated.updated_at, actor=actor, **(data or {}))]
                )
        return stored

    async def load(self, run_id: str) -> ActionRun | None:
        async with self.store.unit() as unit:
            return await unit.runs.get(run_id)

    async def drain(self) -> None:
        """Wait for shielded calls and background work to finish (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._lane is not None:
            await self._lane.drain()
