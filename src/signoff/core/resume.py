"""``Resume``: the approval resume stage — the quorum is there, so check everything again and
dispatch (contract §3):

    resolve definition again -> validate what will run again -> evaluate policy again
      -> the standing approvals' digests equal what would run -> limits re-checked and held
      -> RUNNING with an attempt -> guard -> dispatch

It never reserves a duplicate scope again. A repair keeps the original's attempt token and
holds no limit; an amendment that completed the quorum is judged by its own limit rule
(``decisions.amended_limits``). Durable writes go through the ``RunLedger``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from signoff.core import admission, limit_stage
from signoff.core.answers import outcome_of, terminal_status_for
from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code
from signoff.core.decisions import Plan, amended_limits, digest_refusal
from signoff.core.definition import ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.ledger import RunLedger
from signoff.core.limits import LimitDecision
from signoff.core.ports import Clock
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, RunStatus


class Resume:
    def __init__(self, ledger: RunLedger, dispatcher: Dispatcher, clock: Clock) -> None:
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._clock = clock

    async def resume(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        approver_id: str,
        audit: Mapping[str, Any],
        *,
        base: Plan | None = None,
    ) -> ActionOutcome | None:
        """The last approval arrived: re-check everything, then dispatch. ``None``: CAS lost.

        ``run`` carries the approval (and any amendment) to write, at the version it was read
        at; ``base`` is the decision that completed the quorum."""
        now = self._clock.now()
        state = run.approval
        assert state is not None
        refusal: ExecutionResult | None
        if action is None:
            refusal = ExecutionResult.denied(
                Code.ACTION_NOT_REGISTERED, f"{run.action_id} is no longer registered."
            )
        else:
            refusal = admission.recheck(action, run, now) or digest_refusal(action, run, state)
        if refusal is not None:
            return await self._ledger.terminal(
                run,
                refusal,
                AuditKind.RESUME_REFUSED,
                actor=approver_id,
                data=dict(audit),
                approval=state,
            )
        assert action is not None
        started = self._dispatcher.start_attempt(run, now, approval=state)
        checks = limit_stage.checks_for_run(action, run, admission.policy_input(run, now))
        if isinstance(checks, ExecutionResult):
            return await self._ledger.terminal(
                run,
                checks,
                AuditKind.RESUME_REFUSED,
                actor=approver_id,
                data=dict(audit),
                approval=state,
            )
        held = tuple(check.spec.name for check in checks)
        dispatching = started.model_copy(update={"limits_held": held})
        on_limits: Callable[[LimitDecision], tuple[ActionRun, AuditKind]]
        if base is not None and base.amends:
            base.limits = checks
            on_limits = amended_limits(base, dispatching, AuditKind.APPROVED_DISPATCHING)
        else:

            def on_limits(verdict: LimitDecision) -> tuple[ActionRun, AuditKind]:
                """Resume re-checks the limits: a deny limit now exceeded refuses; an approval
                limit is what the approvers just approved."""
                if verdict.denied:
                    result = limit_stage.denial(verdict)
                    return run.advance(
                        terminal_status_for(result), now, result=result, approval=state
                    ), AuditKind.LIMIT_EXCEEDED
                return dispatching, AuditKind.APPROVED_DISPATCHING

        stored = await self._ledger.cas(
            run,
            dispatching,
            AuditKind.APPROVED_DISPATCHING,
            actor=approver_id,
            data={
                **audit,
                "revision": action.revision,
                "executed_digest": limit_stage.digest_of(action, run),
            },
            limits=checks,
            on_limits=on_limits,
        )
        if stored is None:
            return None
        if stored.is_terminal or stored.status is RunStatus.WAITING_APPROVAL:
            return outcome_of(stored)
        if action.definition.mode is ExecutorMode.ASYNC:
            self._dispatcher.force_background(run.tenant_id)
        return await self._dispatcher.dispatch(action, stored)
