"""The rule that decided a replayed decision, in the words of the definitions replayed against.

Every text here is built from the manifest (a deny rule's code and CEL, the approval rule's CEL
or the default rule's sentence, a limit's name) or from a validation message, which never shows
a ``sensitive`` field's value (``core.validation``).
"""

from __future__ import annotations

from signoff.core.definition import DEFAULT_APPROVAL_WHEN, default_approval_rule
from signoff.core.limits import LimitDecision
from signoff.core.policy import PolicyDecision
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionResult


def approval_rule(action: CompiledAction, decision: PolicyDecision) -> str:
    """The approval rule, and the escalation tier that set the number of approvers."""
    spec = action.definition.approval
    definition = action.definition
    if spec.when == DEFAULT_APPROVAL_WHEN:
        sentence = default_approval_rule(definition.effect, definition.risk)
        text = f"approval (default): {sentence or 'no proposal of this action'}"
    else:
        text = f"approval.when: {spec.when}"
    if decision.tiers:
        index = max(decision.tiers, key=lambda i: spec.escalate[i].count)
        tier = spec.escalate[index]
        text += f"; approval.escalate[{index}] ({tier.count} approvers): {tier.when}"
    elif spec.count > 1:
        text += f"; approval.count: {spec.count}"
    return text


def denial_rule(action: CompiledAction, decision: PolicyDecision) -> str:
    """The policy rule that refused (its path in the manifest, code and condition)."""
    where = decision.rule or "policy"
    policy = action.definition.policy
    if where == "policy.roles":
        return f"policy.roles: {', '.join(policy.roles or ())}"
    if where.startswith("policy.deny["):
        index = int(where[len("policy.deny[") : -1])
        rule = policy.deny[index]
        return f"{where} ({rule.code}): {rule.when}"
    return f"{where}: could not be evaluated (fail closed)"


def refusal_rule(refusal: ExecutionResult) -> str:
    """Refused before policy: the idempotency key or the input schema."""
    if refusal.code.startswith("IDEMPOTENCY_KEY"):
        return "idempotency.key: required" if refusal.code.endswith("REQUIRED") else "key"
    return f"input: {refusal.message}"


def limits_rule(decision: LimitDecision, *, denied: bool) -> str:
    usages = decision.denied if denied else decision.exceeded
    return ", ".join(f"limits.{u.check.spec.name}" for u in usages)
