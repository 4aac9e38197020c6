"""Policy: resource identity, role allow-list, deny rules and the approval rule — fail closed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from signoff.core.cel_expr import CelEvaluationError
from signoff.core.codes import Code
from signoff.core.disclosure import exception_detail
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionResult


@dataclass(frozen=True, slots=True)
class PolicyInput:
    """Everything a policy may look at. Identity fields come from trusted host context only."""

    principal: Principal
    tenant_id: str
    proposer_type: ProposerType
    channel: Channel
    input: dict[str, Any]
    now: datetime


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """``denial`` is set when the request may not proceed; otherwise approval may be required."""

    resource: str | None
    denial: ExecutionResult | None = None
    approval_required: bool = False
    # How many distinct approvers this input needs: the rule's count, raised by matching tiers.
    approvals_needed: int = 1
    # Which rule decided (a denial: ``policy.roles``, ``policy.deny[1]``, or where evaluation
    # failed) and which escalation tiers matched (their indexes), for explanations (replay).
    rule: str | None = None
    tiers: tuple[int, ...] = ()
    # The requester confirms what will run first (``approval.confirm`` matched).
    confirmation_required: bool = False


_STRING: Final = {"type": "string"}


def _record(**fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "additionalProperties": False}


CEL_VARIABLES: Final = ("input", "principal", "tenant", "proposer", "action", "resource", "now")
"""The variables every expression may use (contract §6), in the order the contract lists them."""
CEL_VARIABLE_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "principal": _record(id=_STRING, roles={"type": "array", "items": _STRING}),
    "tenant": _STRING,
    "proposer": _record(type=_STRING, channel=_STRING),
    "action": _record(id=_STRING, effect=_STRING, risk=_STRING),
    "resource": _STRING,
    "now": {"type": "timestamp"},
}
"""What ``_variables`` gives each variable but ``input`` (whose schema is the action's
``spec.input``), as JSON Schema (``timestamp``: CEL's type); ``signoff check`` resolves field
references (``principal.roles``) against them."""


def _variables(
    action: CompiledAction, request: PolicyInput, resource: str | None
) -> dict[str, Any]:
    definition = action.definition
    return {
        "input": request.input,
        "principal": {"id": request.principal.id, "roles": list(request.principal.roles)},
        "tenant": request.tenant_id,
        "proposer": {"type": str(request.proposer_type), "channel": str(request.channel)},
        "action": {
            "id": definition.id,
            "effect": str(definition.effect),
            "risk": str(definition.risk),
        },
        "resource": resource if resource is not None else "",
        "now": request.now,
    }


def cel_variables(
    action: CompiledAction, request: PolicyInput, resource: str | None
) -> dict[str, Any]:
    """The CEL variables of a request (contract §6), for expressions outside the policy."""
    return _variables(action, request, resource)


def _error(where: str, exc: Exception) -> PolicyDecision:
    """Fail closed. The agent learns which rule; the library's text goes to the audit trail."""
    denial = ExecutionResult.denied(
        Code.POLICY_EVALUATION_ERROR, f"The policy could not be evaluated ({where}); denied."
    )
    return PolicyDecision(
        resource=None,
        denial=denial.model_copy(update={"detail": exception_detail(exc)}),
        rule=where,
    )


def roles_allow(action: CompiledAction, principal: Principal) -> bool:
    """The role allow-list, the policy's first check (surfaces also use it to list tools)."""
    roles = action.definition.policy.roles
    return roles is None or principal.has_any_role(roles)


def evaluate_policy(action: CompiledAction, request: PolicyInput) -> PolicyDecision:
    """Resource, roles, deny rules, then the approval rule. Any evaluation error denies."""
    definition = action.definition
    resource: str | None = None
    if action.resource is not None:
        try:
            value = action.resource.evaluate(_variables(action, request, None))
        except CelEvaluationError as exc:
            return _error("resource", exc)
        if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
            return _error("resource", TypeError("resource must be a non-empty string"))
        resource = str(value)

    if not roles_allow(action, request.principal):
        return PolicyDecision(
            resource=resource,
            denial=ExecutionResult.denied(
                Code.POLICY_DENIED,
                f"Principal lacks a permitted role for {definition.id}.",
            ),
            rule="policy.roles",
        )

    variables = _variables(action, request, resource)
    for index, (rule, expr) in enumerate(action.deny):
        try:
            matched = expr.evaluate_bool(variables)
        except CelEvaluationError as exc:
            return _error(f"policy.deny[{index}]", exc)
        if matched:
            return PolicyDecision(
                resource=resource,
                denial=ExecutionResult.denied(rule.code, rule.message),
                rule=f"policy.deny[{index}]",
            )

    try:
        approval_required = action.approval_when.evaluate_bool(variables)
    except CelEvaluationError as exc:
        return _error("approval.when", exc)
    needed = action.definition.approval.count
    tiers: list[int] = []
    for index, (tier_when, count) in enumerate(action.escalations):
        try:
            if tier_when.evaluate_bool(variables):
                needed = max(needed, count)
                tiers.append(index)
        except CelEvaluationError as exc:
            return _error(f"approval.escalate[{index}]", exc)
    confirm = False
    if action.confirm_when is not None:
        try:
            confirm = action.confirm_when.evaluate_bool(variables)
        except CelEvaluationError as exc:
            return _error("approval.confirm.when", exc)
    return PolicyDecision(
        resource=resource,
        approval_required=approval_required,
        approvals_needed=needed,
        tiers=tuple(tiers),
        confirmation_required=confirm,
    )
