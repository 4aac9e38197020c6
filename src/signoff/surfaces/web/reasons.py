"""Why a run needs a person, in the sentence approvers read: the manifest's own, one derived from
its rule with the action's display formats, a limit's reason, or signoff's default rule in words."""

from __future__ import annotations

from typing import Any

from signoff.core.definition import DEFAULT_APPROVAL_WHEN, default_approval_rule
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.manifest.explain import plain, rule_in_words
from signoff.surfaces.web.display import shown


def approval_reason(runtime: Runtime, run: ActionRun) -> str:
    """Why this run needs a person, in a sentence approvers read: the manifest's ``explain``, a
    sentence derived from its rule (values as the action displays them), a limit's reason, or
    signoff's default rule in words — never the rule's CEL."""
    action = runtime.action(run.action_id)
    if action is None:
        return "Its action is no longer registered."
    definition = action.definition
    spec = definition.approval
    state = run.approval
    needed = state.count if state is not None else spec.count
    who = f"{needed} approval{'s' if needed != 1 else ''} from {' or '.join(spec.approver_roles)}"
    if state is not None and state.reason:
        return f"{state.reason} It needs {who}."  # parked by a cumulative limit
    if spec.when == DEFAULT_APPROVAL_WHEN:
        stops = default_approval_rule(definition.effect, definition.risk)
        return f"signoff's default rule stops {stops or 'this proposal'} and asks for {who}."
    if spec.when.strip() == "true":
        return f"Every call of this {definition.risk}-risk action needs {who}."

    def fmt(name: str, value: Any) -> str:
        display = definition.display.get(name)
        return shown(value, display) if display is not None else plain(name, value)

    reasons = [spec.explain or _capitalised(rule_in_words(spec.when, fmt)) + "."]
    reasons += [
        tier.explain or f"More approvers because {rule_in_words(tier.when, fmt)}."
        for tier in spec.escalate
        if tier.count == needed and needed > spec.count
    ]
    return " ".join(_sentence(reason) for reason in reasons) + f" It needs {who}."


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."
