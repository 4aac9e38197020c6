"""``Repair``: an operator re-dispatches a MANUAL_REVIEW run of an idempotent executor.

A terminal run never changes, so the repair is a **new run** (``repair_of`` = the original run,
whose operation id it carries; ``repairs`` = the run it re-dispatches) so the executor (an HTTP
endpoint: its ``Idempotency-Key``) recognises the same operation and cannot apply it twice. It
takes the governed path again, decided under the action's own approval rule:

    resolve -> the executor is idempotent -> validate what was approved -> current policy
      -> one repair of this run at a time (a duplicate scope) -> the action's approval rule
      (quorum, never the proposer: the operator's request is the first approval)
      -> guard -> dispatch (with ``executor.retry``) -> record

- **Single flight**: each run can be re-dispatched once. The repair reserves the duplicate scope
  ``repair:<run id>`` in the unit that creates it, so of many concurrent requests on one run
  exactly one creates a working repair; the others are recorded as refused
  (``REPAIR_IN_PROGRESS`` while it works, ``REPAIR_NOT_APPLICABLE`` once it ended).
- **Chained**: a repair that itself fails with MANUAL_REVIEW can be re-dispatched in turn; the
  new repair still carries the original's operation id (``repair_of``) and names the repair it
  re-dispatches (``repairs``). Re-dispatching the original a second time is refused: re-dispatch
  the latest repair instead.
- **The approval rule applies**: the operator's request counts as one approval; an action whose
  approvals need two approvers leaves the repair waiting for a second one
  (``WAITING_APPROVAL``, decided through ``Approvals`` like any approval), and a repair holds no
  cumulative limit (it repeats an operation already counted).

Who may ask: a principal holding one of the action's approver roles, never the run's proposer.
Refusals answer with a stable code: ``REPAIR_NOT_APPLICABLE``, ``REPAIR_NOT_IDEMPOTENT``,
``REPAIR_IN_PROGRESS``, ``APPROVER_NOT_ELIGIBLE``, ``ACTION_NOT_REGISTERED``,
``ACTION_RUN_NOT_FOUND``. The repaired run's trail stays as it ended; the repair run's trail
opens with ``proposed`` naming ``repair_of``, ``repairs``, the operator, their roles and reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from signoff.core import admission, limit_stage, substance
from signoff.core.answers import not_found, outcome_of, terminal_status_for
from signoff.core.approvals import Approvals, DecisionRequest
from signoff.core.audit_events import AuditKind, event
from signoff.core.background import Notifications
from signoff.core.clock import new_run_id
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import ExecutorMode
from signoff.core.identity import Channel, Principal
from signoff.core.ledger import RunLedger
from signoff.core.ports import AuditEvent, Clock, DuplicateEntry, DuplicateState
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, ApprovalVote, DuplicateScope, RunStatus

REPAIR_SCOPE = "repair"
"""The visibility part of a repair's duplicate scope (never a principal, resource or ``*``)."""

REFUSALS = frozenset(
    {
        Code.REPAIR_NOT_APPLICABLE,
        Code.REPAIR_NOT_IDEMPOTENT,
        Code.REPAIR_IN_PROGRESS,
        Code.APPROVER_NOT_ELIGIBLE,
        Code.ACTION_NOT_REGISTERED,
        Code.ACTION_RUN_NOT_FOUND,
    }
)
"""The codes of a re-dispatch that did not happen."""


@dataclass(frozen=True, slots=True)
class RepairRequest:
    operator: Principal
    reason: str
    channel: Channel = Channel.API
    via: str | None = None


def repair_scope(run: ActionRun) -> DuplicateScope:
    """The one repair ``run`` may have: reserved by it, owned by the repair run."""
    return DuplicateScope(
        tenant_id=run.tenant_id,
        action_id=run.action_id,
        idempotency_key=f"repair:{run.run_id}",
        visibility=REPAIR_SCOPE,
    )


class Repair:
    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        approvals: Approvals,
        clock: Clock,
        notifications: Notifications,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._approvals = approvals
        self._clock = clock
        self._notifications = notifications

    async def redispatch(
        self, run_id: str, tenant_id: str, request: RepairRequest
    ) -> ActionOutcome:
        repaired = await self._ledger.load_in(run_id, tenant_id)
        if repaired is None:
            return not_found(run_id)
        action = self._registry.resolve(repaired.action_id)
        refusal = self._refusal(repaired, action, request.operator)
        if refusal is not None:
            return outcome_of(repaired, code=refusal[0], message=refusal[1])
        assert action is not None and repaired.attempt_token is not None
        repair, events = self._opened(action, repaired, request)
        rechecked = admission.recheck(action, repair, self._clock.now())
        if rechecked is not None:
            return await self._refused(repair, events, rechecked)
        scope = repair_scope(repaired)
        waiting, events = self._waiting(action, repair, events, scope, request)
        before = list(events[:-2])

        def on_duplicate(existing: DuplicateEntry) -> tuple[ActionRun, list[AuditEvent]]:
            if existing.state is DuplicateState.RUNNING:
                result = ExecutionResult.denied(
                    Code.REPAIR_IN_PROGRESS,
                    f"This run is being re-dispatched already (run {existing.owner_run_id}).",
                )
            else:
                result = ExecutionResult.denied(
                    Code.REPAIR_NOT_APPLICABLE,
                    f"This run was re-dispatched already (run {existing.owner_run_id}); "
                    "re-dispatch that run if it needs it.",
                )
            answer = repair.advance(terminal_status_for(result), repair.updated_at, result=result)
            duplicate = event(answer, AuditKind.DUPLICATE, answer.updated_at, code=result.code)
            return answer.model_copy(update={"duplicate_of": existing.owner_run_id}), [
                *before,
                duplicate,
            ]

        stored = await self._ledger.create(waiting, events, scope=scope, on_duplicate=on_duplicate)
        if stored.is_terminal:
            return outcome_of(stored)
        # The operator's request is the first approval; the approval rule decides the rest.
        decided = await self._approvals.decide(
            stored.run_id,
            tenant_id,
            DecisionRequest(
                approver=request.operator,
                vote=ApprovalVote.APPROVE,
                reason=request.reason,
                channel=request.channel,
                via=request.via,
                expected_version=stored.version,
            ),
        )
        outcome = decided.outcome if decided.outcome is not None else outcome_of(stored)
        if outcome.status is ExecutionStatus.PENDING_APPROVAL:  # the rule asks for more approvers
            current = await self._ledger.load(stored.run_id)
            if current is not None:
                self._notifications.requested(current)
        return outcome

    def _opened(
        self, action: CompiledAction, repaired: ActionRun, request: RepairRequest
    ) -> tuple[ActionRun, list[AuditEvent]]:
        """The repair run up to policy, carrying what was approved and the operation id."""
        now = self._clock.now()
        root = repaired.repair_of or repaired.run_id
        repair = ActionRun(
            run_id=new_run_id(),
            tenant_id=repaired.tenant_id,
            action_id=repaired.action_id,
            principal=repaired.principal,
            channel=request.channel,
            proposer_type=repaired.proposer_type,
            input=repaired.input,
            # What was approved is what is re-dispatched: amendments and the preview carry over.
            approved_input=repaired.approved_input,
            amendments=repaired.amendments,
            preview=repaired.preview,
            repair_of=root,
            repairs=repaired.run_id,
            # The same attempt token as the original: the operation id is the original's.
            attempt_token=repaired.attempt_token,
            created_at=now,
            updated_at=now,
        )
        events = [
            event(
                repair,
                AuditKind.PROPOSED,
                now,
                actor=request.operator.id,
                repair_of=root,
                repairs=repaired.run_id,
                reason=request.reason,
                via=request.via,
                roles=list(request.operator.roles),
            )
        ]
        repair = repair.advance(RunStatus.VALIDATING, now, executor_mode=action.definition.mode)
        events.append(event(repair, AuditKind.RESOLVED, now, revision=action.revision))
        repair = repair.advance(
            RunStatus.POLICY_EVALUATED,
            now,
            input_hash=repaired.input_hash,
            resource=repaired.resource,
        )
        return repair, events

    def _waiting(
        self,
        action: CompiledAction,
        repair: ActionRun,
        events: list[AuditEvent],
        scope: DuplicateScope,
        request: RepairRequest,
    ) -> tuple[ActionRun, list[AuditEvent]]:
        """The repair waiting for the action's approval rule, its scope reserved."""
        now = repair.updated_at
        events = [*events, event(repair, AuditKind.POLICY_ALLOWED, now, approval_required=True)]
        events.append(event(repair, AuditKind.RESERVED, now, scope=scope.visibility))
        state = limit_stage.requested_approval(action, repair, now)
        waiting = repair.advance(
            RunStatus.WAITING_APPROVAL, now, duplicate_scope=scope, approval=state
        )
        events.append(
            event(
                waiting,
                AuditKind.APPROVAL_REQUESTED,
                now,
                code=Code.APPROVAL_REQUIRED,
                operation_id=waiting.operation_id,
                requested_by=request.operator.id,
                will_run=substance.of(waiting).will_run_digest,
            )
        )
        return waiting, events

    async def _refused(
        self, repair: ActionRun, events: list[AuditEvent], result: ExecutionResult
    ) -> ActionOutcome:
        refused = repair.advance(terminal_status_for(result), repair.updated_at, result=result)
        events.append(event(refused, AuditKind.REFUSED, refused.updated_at, code=result.code))
        await self._ledger.create(refused, events)
        return outcome_of(refused)

    @staticmethod
    def _refusal(
        run: ActionRun, action: CompiledAction | None, operator: Principal
    ) -> tuple[Code, str] | None:
        result = run.result
        reviewable = (
            result is not None
            and run.status is RunStatus.FAILED
            and result.status is ExecutionStatus.FAILED
            and result.retry is RetryDisposition.MANUAL_REVIEW
            and run.attempt_token is not None
        )
        if not reviewable:
            return (
                Code.REPAIR_NOT_APPLICABLE,
                "Only a dispatched run that failed with MANUAL_REVIEW can be re-dispatched.",
            )
        if action is None:
            return Code.ACTION_NOT_REGISTERED, f"No action {run.action_id!r} is registered."
        if not action.definition.executor_idempotent:
            return (
                Code.REPAIR_NOT_IDEMPOTENT,
                "The executor is not idempotent: a re-dispatch could repeat its effect.",
            )
        if action.definition.mode is ExecutorMode.DEFERRED:
            return (
                Code.REPAIR_NOT_APPLICABLE,
                "Deferred work is completed by its external system, not re-dispatched.",
            )
        roles = action.definition.approval.approver_roles
        if operator.id == run.principal.id or not operator.has_any_role(roles):
            return (
                Code.APPROVER_NOT_ELIGIBLE,
                f"Re-dispatching needs one of the roles {', '.join(roles)}, and not the proposer.",
            )
        return None
