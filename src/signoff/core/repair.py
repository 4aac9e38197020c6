"""``Repair``: an operator re-dispatches a MANUAL_REVIEW run of an idempotent executor.

A terminal run never changes, so the repair is a **new run** (``repair_of`` = the original) that
carries the original's operation id: the executor (an HTTP endpoint: its ``Idempotency-Key``)
recognises the same operation and cannot apply it twice. It takes the full governed path again:

    resolve -> the executor is idempotent -> validate the stored input -> current policy
      -> guard -> dispatch (with ``executor.retry``) -> record

Who may: a principal holding one of the action's approver roles, never the run's proposer (an
approver credential on the API, ``--roles`` on the CLI). Refusals leave the original untouched
and answer with a stable code: ``REPAIR_NOT_APPLICABLE`` (not a dispatched MANUAL_REVIEW failure,
or deferred work), ``REPAIR_NOT_IDEMPOTENT`` (a re-dispatch could repeat the effect: never),
``APPROVER_NOT_ELIGIBLE``, ``ACTION_NOT_REGISTERED``, ``ACTION_RUN_NOT_FOUND``. The original's
trail stays as it ended (a terminal run's trail ends with its result); the repair run's trail
opens with ``proposed`` naming ``repair_of``, the operator, their roles and reason, and records
every stage after.
"""

from __future__ import annotations

from dataclasses import dataclass

from signoff.core import admission
from signoff.core.answers import not_found, outcome_of, terminal_status_for
from signoff.core.audit_events import AuditKind, event
from signoff.core.clock import new_run_id
from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.identity import Channel, Principal
from signoff.core.ledger import RunLedger
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun, RunStatus


@dataclass(frozen=True, slots=True)
class RepairRequest:
    operator: Principal
    reason: str
    channel: Channel = Channel.API
    via: str | None = None


class Repair:
    def __init__(
        self, registry: ActionRegistry, ledger: RunLedger, dispatcher: Dispatcher, clock: Clock
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._clock = clock

    async def redispatch(
        self, run_id: str, tenant_id: str, request: RepairRequest
    ) -> ActionOutcome:
        original = await self._ledger.load_in(run_id, tenant_id)
        if original is None:
            return not_found(run_id)
        action = self._registry.resolve(original.action_id)
        refusal = self._refusal(original, action, request.operator)
        if refusal is not None:
            return outcome_of(original, code=refusal[0], message=refusal[1])
        assert action is not None and original.attempt_token is not None
        now = self._clock.now()
        repair = ActionRun(
            run_id=new_run_id(),
            tenant_id=original.tenant_id,
            action_id=original.action_id,
            principal=original.principal,
            channel=request.channel,
            proposer_type=original.proposer_type,
            input=original.input,
            # What was approved is what is re-dispatched: amendments and the preview carry over.
            approved_input=original.approved_input,
            amendments=original.amendments,
            preview=original.preview,
            repair_of=original.run_id,
            created_at=now,
            updated_at=now,
        )
        operator = request.operator.id
        events = [
            event(
                repair,
                AuditKind.PROPOSED,
                now,
                actor=operator,
                repair_of=original.run_id,
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
            input_hash=original.input_hash,
            resource=original.resource,
        )
        rechecked = admission.recheck(action, repair, now)
        if rechecked is not None:
            repair = repair.advance(terminal_status_for(rechecked), now, result=rechecked)
            events.append(event(repair, AuditKind.REFUSED, now, code=rechecked.code))
            await self._ledger.create(repair, events)
            return outcome_of(repair)
        events.append(event(repair, AuditKind.POLICY_ALLOWED, now, approval_required=False))
        # Same attempt token as the original: the operation id is the original's.
        repair = repair.advance(
            RunStatus.RUNNING,
            now,
            attempt=1,
            attempt_token=original.attempt_token,
            worker_id=self._dispatcher.worker_id,
            dispatched_at=now,
        )
        events.append(
            event(repair, AuditKind.DISPATCHING, now, attempt=1, operation_id=repair.operation_id)
        )
        stored = await self._ledger.create(repair, events)
        return await self._dispatcher.execute(action, stored)

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
