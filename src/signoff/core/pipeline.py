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

import logging
from datetime import datetime

from signoff.core import admission, confirmation, limit_stage
from signoff.core.answers import outcome_of, terminal_status_for
from signoff.core.audit_events import AuditKind, event
from signoff.core.background import Notifications
from signoff.core.clock import new_run_id
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.confirmation import Confirmations
from signoff.core.confirmer import Confirmer
from signoff.core.definition import ConfirmFallback, ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.input_limits import DEFAULT_LIMITS, InputLimits, screen, storable_key
from signoff.core.ledger import RunLedger
from signoff.core.limits import LimitDecision
from signoff.core.observe import NO_OBSERVER, RuntimeObserver
from signoff.core.ports import AuditEvent, Clock, DuplicateEntry, DuplicateState
from signoff.core.preview import run_preview
from signoff.core.proposal import ActionProposal, canonical_hash
from signoff.core.registry import ActionRegistry
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus

log = logging.getLogger("signoff")


class Pipeline:
    """Owns the new-proposal path: the stages above, up to the first durable boundary."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        notifications: Notifications,
        clock: Clock,
        limits: InputLimits = DEFAULT_LIMITS,
        observer: RuntimeObserver = NO_OBSERVER,
        pending_per_principal: int | None = None,
        confirmations: Confirmations | None = None,
    ) -> None:
        self._confirmations = confirmations
        self._limits = limits
        self._pending_per_principal = pending_per_principal
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._notifications = notifications
        self._clock = clock
        self._observer = observer

    async def _too_many_pending(self, run: ActionRun) -> bool:
        """The proposer's share of pending approvals is used up (contract §9): a flood from one
        principal cannot bury everyone else's requests. Checked before the run waits; proposals
        racing each other may overshoot by the number in flight."""
        cap = self._pending_per_principal
        if cap is None:
            return False
        waiting = await self._ledger.runs(
            tenant_id=run.tenant_id,
            statuses=[RunStatus.WAITING_APPROVAL],
            principal_id=run.principal.id,
            limit=cap,
        )
        return len(waiting) >= cap

    async def propose(
        self, proposal: ActionProposal, confirmer: Confirmer | None = None
    ) -> ActionOutcome:
        """Govern one proposal; ``confirmer`` asks the requester's human when the action wants
        the requester's confirmation (``approval.confirm``, ``confirmation.py``).

        If signoff itself fails (a store outage), the answer is ``ACTION_RUNTIME_FAILED`` /
        ``MANUAL_REVIEW`` with the run id: the run may or may not have been recorded, and a run
        left RUNNING is settled by recovery.
        """
        run_id = new_run_id()
        try:
            return await self._propose(proposal, run_id, confirmer)
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

    async def _propose(  # noqa: C901 - the one exception left: to be split along its stages
        self, proposal: ActionProposal, run_id: str, confirmer: Confirmer | None
    ) -> ActionOutcome:
        now = self._clock.now()
        # Input limits first (contract §9): nothing a proposal carries is stored unchecked.
        refused = screen(proposal.action_id, proposal.input, self._limits)
        data = proposal.input if isinstance(proposal.input, dict) else {}
        run = ActionRun(
            run_id=run_id,
            tenant_id=proposal.tenant_id,
            action_id=refused.action_id if refused else proposal.action_id,
            principal=proposal.principal,
            channel=proposal.channel,
            proposer_type=proposal.proposer_type,
            idempotency_key=storable_key(proposal.idempotency_key),
            input=refused.input if refused else data,
            created_at=now,
            updated_at=now,
        )
        events = [
            event(
                run,
                AuditKind.PROPOSED,
                now,
                channel=str(proposal.channel),
                proposer_type=str(proposal.proposer_type),
                roles=list(proposal.principal.roles),
            )
        ]

        if refused is not None:
            return await self._refuse(
                run,
                events,
                ExecutionResult.invalid(Code.INPUT_VALIDATION_FAILED, refused.message).model_copy(
                    update={"output": {"refused": refused.reason}}
                ),
            )
        observe = self._observer.stage
        with observe("resolve", run_id, proposal.action_id) as resolving:
            action = self._registry.resolve(proposal.action_id)
            resolving.set(registered=action is not None)
        if action is None:
            return await self._refuse(
                run,
                events,
                ExecutionResult.invalid(
                    Code.ACTION_NOT_REGISTERED, f"No action {proposal.action_id!r} is registered."
                ),
            )
        run = run.advance(RunStatus.VALIDATING, now, executor_mode=action.definition.mode)
        events.append(event(run, AuditKind.RESOLVED, now, revision=action.revision))

        verdict = admission.admit(
            action,
            admission.policy_input(run, now),
            proposal.input,
            proposal.idempotency_key,
            stage=lambda name: observe(name, run_id, action.id),
        )
        if verdict.decision is None:  # refused by the key or the schema
            assert verdict.refusal is not None
            return await self._refuse(run, events, verdict.refusal)
        decision = verdict.decision
        input_hash = canonical_hash(data)
        if decision.denial is not None:
            run = run.advance(RunStatus.POLICY_EVALUATED, now, input_hash=input_hash)
            return await self._refuse(run, events, decision.denial)
        run = run.advance(
            RunStatus.POLICY_EVALUATED, now, input_hash=input_hash, resource=decision.resource
        )
        events.append(
            event(
                run,
                AuditKind.POLICY_ALLOWED,
                now,
                approval_required=decision.approval_required,
                approvals_needed=decision.approvals_needed,
            )
        )

        checks = limit_stage.checks_for(action, run, admission.policy_input(run, now))
        if isinstance(checks, ExecutionResult):
            return await self._refuse(run, events, checks)
        approval_required, confirm = decision.approval_required, decision.confirmation_required
        if confirm and (confirmer is None or not confirmer.available):
            spec = action.definition.approval.confirm
            assert spec is not None
            if spec.fallback is ConfirmFallback.REFUSE:
                return await self._refuse(run, events, confirmation.unavailable())
            confirm, approval_required = False, True  # the manifest routes it to approvers
            events.append(event(run, AuditKind.CONFIRMATION_FALLBACK, now, fallback=spec.fallback))
        waits = approval_required or confirm
        if waits and await self._too_many_pending(run):
            return await self._refuse(
                run,
                events,
                ExecutionResult.retryable_failure(
                    Code.PENDING_APPROVALS_LIMIT,
                    f"{self._pending_per_principal} of your requests already wait for approval; "
                    "retry once some are decided.",
                ),
            )
        scope = admission.duplicate_scope(action, run)
        evaluated = run
        background = action.definition.mode is ExecutorMode.ASYNC and not waits
        if background and not self._dispatcher.admit_background(run.tenant_id):
            return await self._refuse(
                run,
                events,
                ExecutionResult.retryable_failure(
                    Code.ACTION_LANE_FULL, "Too much background work in progress; retry later."
                ),
            )
        preview = None
        if waits and action.definition.preview is not None:
            # The dry run happens before anything is reserved: a failed preview asks nobody.
            found = await run_preview(action, run, now)
            if isinstance(found, ExecutionResult):
                return await self._refuse(run, events, found)
            preview = found
            events.append(event(run, AuditKind.PREVIEWED, now, digest=preview.digest))
        before = list(events)
        if scope is not None:
            events.append(event(run, AuditKind.RESERVED, now, scope=scope.visibility))
        reserved = list(events)
        if waits:
            requested = limit_stage.requested_approval(
                action, run, now, count=decision.approvals_needed
            )
            if confirm:
                requested = confirmation.asked(requested, run, now, approvers=approval_required)
            waiting = run.advance(
                RunStatus.WAITING_APPROVAL, now, duplicate_scope=scope, approval=requested
            )
            run = waiting if preview is None else waiting.model_copy(update={"preview": preview})
            code = Code.CONFIRMATION_REQUIRED if confirm else Code.APPROVAL_REQUIRED
            events.append(event(run, AuditKind.APPROVAL_REQUESTED, now, code=code))
        else:
            run = self._dispatcher.start_attempt(run, now, duplicate_scope=scope)
            events.append(event(run, AuditKind.DISPATCHING, now, attempt=run.attempt))

        def on_duplicate(existing: DuplicateEntry) -> tuple[ActionRun, list[AuditEvent]]:
            answer = self._duplicate_answer(evaluated, existing, now)
            code = answer.result.code if answer.result else None
            return answer, [*before, event(answer, AuditKind.DUPLICATE, now, code=code)]

        planned, planned_events = run, events
        names = tuple(check.spec.name for check in checks)

        def on_limits(verdict: LimitDecision) -> tuple[ActionRun, list[AuditEvent]]:
            """Within every limit: as planned. Over a deny limit: refused, nothing held. Over an
            approval limit: held, and the run waits for a human told which limit and how far."""
            if verdict.denied:
                result = limit_stage.denial(verdict)
                denied = evaluated.advance(terminal_status_for(result), now, result=result)
                return denied, [
                    *before,
                    event(denied, AuditKind.LIMIT_EXCEEDED, now, code=result.code),
                ]
            if not verdict.exceeded:
                return planned.model_copy(update={"limits_held": names}), planned_events
            reason = limit_stage.approval_reason(verdict)
            held = limit_stage.requested_approval(
                action, evaluated, now, reason, count=decision.approvals_needed
            )
            if confirm:  # the requester confirms first, then the approvers the limit asks for
                held = confirmation.asked(held, evaluated, now, approvers=True)
            parked = evaluated.advance(
                RunStatus.WAITING_APPROVAL,
                now,
                duplicate_scope=scope,
                limits_held=names,
                approval=held,
            )
            requested = event(
                parked,
                AuditKind.APPROVAL_REQUESTED,
                now,
                code=Code.APPROVAL_REQUIRED,
                reason=reason,
                limits=[u.check.spec.name for u in verdict.exceeded],
            )
            return parked, [*reserved, requested]

        try:
            with observe("reserve", run_id, action.id) as reserving:
                run = await self._ledger.create(
                    run,
                    events,
                    scope=scope,
                    on_duplicate=on_duplicate,
                    limits=checks,
                    on_limits=on_limits,
                )
                reserving.set(scoped=scope is not None, duplicate=run.is_terminal)
        except BaseException:
            if background:
                self._dispatcher.release_background(run.tenant_id)
            raise
        if run.is_terminal:  # a duplicate answered from the stored entry
            if background:
                self._dispatcher.release_background(run.tenant_id)
            return outcome_of(run)
        if run.status is RunStatus.WAITING_APPROVAL:
            if background:  # parked by a limit: its lane slot was never used
                self._dispatcher.release_background(run.tenant_id)
            state = run.approval
            if state is not None and state.awaits_confirmation:
                assert confirmer is not None and self._confirmations is not None
                return await self._confirmations.ask(action, run, confirmer)
            self._notifications.requested(run)
            return outcome_of(run)
        return await self._dispatcher.dispatch(action, run)

    @staticmethod
    def _duplicate_answer(run: ActionRun, existing: DuplicateEntry, now: datetime) -> ActionRun:
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

    async def _refuse(
        self, run: ActionRun, events: list[AuditEvent], result: ExecutionResult
    ) -> ActionOutcome:
        """Record a proposal refused before reservation: one commit, nothing reserved."""
        now = self._clock.now()
        run = run.advance(terminal_status_for(result), now, result=result)
        events.append(event(run, AuditKind.REFUSED, now, code=result.code))
        with self._observer.stage("record", run.run_id, run.action_id) as recording:
            recording.set(code=result.code)
            return outcome_of(await self._ledger.create(run, events))
