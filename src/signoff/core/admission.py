"""What lets a request through, decided in memory: the idempotency key, the input schema, the
policy — in that order, stated once by ``admit`` — the duplicate scope and the approval a run
will wait for; and ``recheck``, the same checks against the *current* definition before a
resumed or recovered run may dispatch.

Pure functions of the definition, the run and the time: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from signoff.core import substance
from signoff.core.clock import new_token
from signoff.core.codes import Code
from signoff.core.definition import DuplicateVisibility, KeyRequirement
from signoff.core.identity import is_valid_idempotency_key
from signoff.core.observe import NO_OBSERVER, StageScope
from signoff.core.policy import PolicyDecision, PolicyInput, evaluate_policy
from signoff.core.registry import CompiledAction, validate_input
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, ApprovalState, DuplicateScope


class Stage(StrEnum):
    """The stages before the first durable boundary, in the order they run."""

    KEY = "key"
    VALIDATION = "validation"
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class Admission:
    """Where a request stopped (``refusal`` at ``stage``), or the policy's decision to go on."""

    stage: Stage
    refusal: ExecutionResult | None = None
    decision: PolicyDecision | None = None


def admit(
    action: CompiledAction,
    request: PolicyInput,
    data: Any,
    key: str | None,
    *,
    check_keys: bool = True,
    stage: StageHook | None = None,
) -> Admission:
    """The idempotency key, then the input ``data`` against the schema, then the policy.

    The pipeline runs it for every proposal; manifest ``tests:`` cases (``check_keys=False``,
    they carry no key) ask it what the pipeline would decide. ``stage`` observes the
    ``validate`` and ``policy`` stages (``observe.py``).
    """
    observe = stage if stage is not None else _unobserved
    with observe("validate") as validating:
        refusal = check_key(action, key) if check_keys else None
        if refusal is not None:
            validating.set(code=refusal.code)
            return Admission(Stage.KEY, refusal)
        refusal = validate(action, data)
        if refusal is not None:
            validating.set(code=refusal.code)
            return Admission(Stage.VALIDATION, refusal)
    with observe("policy") as deciding:
        decision = evaluate_policy(action, request)
        denial = decision.denial
        deciding.set(
            code=denial.code if denial is not None else "ALLOWED",
            approval_required=decision.approval_required,
        )
    return Admission(Stage.POLICY, decision.denial, decision)


StageHook = Callable[[str], AbstractContextManager[StageScope]]


def _unobserved(name: str) -> AbstractContextManager[StageScope]:
    return NO_OBSERVER.stage(name, "", "")


def check_key(action: CompiledAction, key: str | None) -> ExecutionResult | None:
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


def validate(action: CompiledAction, data: Any) -> ExecutionResult | None:
    errors = validate_input(action, data)
    if not errors:
        return None
    first = errors[0]
    return ExecutionResult.invalid(
        Code.INPUT_VALIDATION_FAILED, f"{first['path']}: {first['message']}"
    ).model_copy(update={"output": {"errors": errors}})


def policy_input(run: ActionRun, now: datetime, data: Any = None) -> PolicyInput:
    """Policy sees the effective input (approved, if amended), or ``data`` when given."""
    return PolicyInput(
        principal=run.principal,
        tenant_id=run.tenant_id,
        proposer_type=run.proposer_type,
        channel=run.channel,
        input=substance.will_run(run) if data is None else data,
        now=now,
    )


def recheck(action: CompiledAction, run: ActionRun, now: datetime) -> ExecutionResult | None:
    """Validate the stored input and evaluate the *current* policy again (resume, recovery)."""
    invalid = validate(action, substance.will_run(run))
    if invalid is not None:
        return invalid
    decision = evaluate_policy(action, policy_input(run, now))
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


def duplicate_scope(action: CompiledAction, run: ActionRun) -> DuplicateScope | None:
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


def approval_state(
    action: CompiledAction, now: datetime, count: int | None = None
) -> ApprovalState:
    """The approval a run will wait for; ``count`` is the policy's (escalated) number needed."""
    spec = action.definition.approval
    return ApprovalState(
        approval_id=new_token(),
        approver_roles=spec.approver_roles,
        count=max(spec.count, count or 0),
        requested_at=now,
        expires_at=now + spec.expires_after if spec.expires_after is not None else None,
    )
