"""What was decided for a run at one stage, read from its trail or replayed — and what changed.

A ``Decision`` is the part of the pipeline's answer that definitions decide: refused (with its
code), denied by a cumulative limit, waiting for approval (the approval rule, approval limits),
dispatched at once, answered as a duplicate, or stopped after policy by a runtime condition (a
full lane, the pending cap, a failed preview — which no definition replays).

``original_proposal`` reads the decision the pipeline made from the events of the proposal's
unit of work (``policy_allowed`` says whether the approval rule asked for approval and for how
many approvers, the closing event what became of it); ``original_resume`` reads the decision at
dispatch after approval from its event. ``changes`` compares two decisions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code
from signoff.core.ports import AuditEvent
from signoff.core.run import ActionRun


class Outcome(StrEnum):
    REFUSED = "refused"
    LIMIT_DENIED = "limit_denied"
    APPROVAL = "approval"
    DISPATCH = "dispatch"
    DUPLICATE = "duplicate"
    STOPPED = "stopped"


class Stage(StrEnum):
    PROPOSAL = "proposal"
    DISPATCH = "dispatch"
    """The re-check before dispatch, once approved: policy on what will run, and the limits."""


class ChangeKind(StrEnum):
    ALLOWED_TO_DENIED = "allowed_to_denied"
    DENIED_TO_ALLOWED = "denied_to_allowed"
    DENY_CODE_CHANGED = "deny_code_changed"
    APPROVAL_NEWLY_REQUIRED = "approval_newly_required"
    APPROVAL_NO_LONGER_REQUIRED = "approval_no_longer_required"
    APPROVALS_NEEDED_CHANGED = "approvals_needed_changed"
    LIMIT_HIT_APPEARED = "limit_hit_appeared"
    LIMIT_HIT_DISAPPEARED = "limit_hit_disappeared"
    ACTION_REMOVED = "action_removed"
    INPUT_NO_LONGER_VALID = "input_no_longer_valid"


RUNTIME_STOPS = frozenset(
    {
        Code.PENDING_APPROVALS_LIMIT,
        Code.ACTION_LANE_FULL,
        Code.PREVIEW_FAILED,
        Code.CONFIRMATION_UNAVAILABLE,
    }
)
"""Refusals after policy that depend on the moment (or the host), not on the definitions."""
CLOSING = frozenset(
    {
        AuditKind.REFUSED,
        AuditKind.LIMIT_EXCEEDED,
        AuditKind.DUPLICATE,
        AuditKind.APPROVAL_REQUESTED,
        AuditKind.DISPATCHING,
    }
)
"""The event that ends a proposal's unit of work: what became of it."""
RESUMES = frozenset(
    {AuditKind.APPROVED_DISPATCHING, AuditKind.LIMIT_EXCEEDED, AuditKind.RESUME_REFUSED}
)
"""After the proposal: the re-check before dispatch and what it decided."""
_QUOTED = re.compile(r"limit '([^']+)'")


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    code: str | None = None
    approval: bool | None = None
    """The approval rule asked for approval (``None``: not evaluated, or not recorded)."""
    needed: int | None = None
    """How many approvers it asked for."""
    limits: tuple[str, ...] = ()
    """The cumulative limits exceeded: over an approval limit (parked) or a deny limit."""
    rule: str | None = None
    """Replayed: the rule that decided the outcome."""
    approval_rule: str | None = None
    """Replayed: the approval rule (and the tier that set the count)."""

    @property
    def refused(self) -> bool:
        return self.outcome in (Outcome.REFUSED, Outcome.LIMIT_DENIED)

    @property
    def reached_limits(self) -> bool:
        return self.outcome in (Outcome.LIMIT_DENIED, Outcome.APPROVAL, Outcome.DISPATCH)

    def record(self) -> dict[str, Any]:
        found: dict[str, Any] = {"outcome": str(self.outcome)}
        if self.code is not None:
            found["code"] = self.code
        if self.approval is not None:
            found["approval_required"] = self.approval
        if self.needed is not None and self.approval:
            found["approvals_needed"] = self.needed
        if self.limits:
            found["limits"] = list(self.limits)
        return found


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    stage: Stage
    rule: str


def _data(event: AuditEvent | None) -> dict[str, Any]:
    return dict(event.data or {}) if event is not None else {}


def denied_limits(run: ActionRun) -> tuple[str, ...]:
    output = run.result.output if run.result is not None else None
    names = output.get("limits") if isinstance(output, dict) else None
    return tuple(str(n) for n in names) if isinstance(names, list) else ()


def screened(run: ActionRun, unit: Sequence[AuditEvent]) -> bool:
    """Refused by the input limits before the action was resolved: the stored input is a
    bounded summary, not what was proposed."""
    output = run.result.output if run.result is not None else None
    return (
        isinstance(output, dict)
        and "refused" in output
        and not any(e.kind == AuditKind.RESOLVED for e in unit)
    )


def original_proposal(run: ActionRun, unit: Sequence[AuditEvent]) -> Decision:
    """The decision recorded by the proposal's unit of work (``unit`` ends with its closing
    event)."""
    allowed = next((e for e in unit if e.kind == AuditKind.POLICY_ALLOWED), None)
    facts = _data(allowed)
    approval = facts.get("approval_required")
    approval = approval if isinstance(approval, bool) else None
    needed = facts.get("approvals_needed")
    closing = unit[-1]
    if not isinstance(needed, int) and closing.kind == AuditKind.APPROVAL_REQUESTED:
        # Written before the count was recorded: the run's own, unless an amendment raised it.
        state = run.approval
        needed = state.count if state is not None and not run.amendments else None
    count = needed if isinstance(needed, int) else None
    code = closing.code or (run.result.code if run.result is not None else None)
    if closing.kind == AuditKind.REFUSED:
        if allowed is not None and code in RUNTIME_STOPS:
            return Decision(Outcome.STOPPED, code, approval, count)
        return Decision(Outcome.REFUSED, code)
    if closing.kind == AuditKind.LIMIT_EXCEEDED:
        return Decision(
            Outcome.LIMIT_DENIED, Code.LIMIT_EXCEEDED, approval, count, denied_limits(run)
        )
    if closing.kind == AuditKind.DUPLICATE:
        return Decision(Outcome.DUPLICATE, code, approval, count)
    if closing.kind == AuditKind.APPROVAL_REQUESTED:
        data = _data(closing)
        names = data.get("limits")
        if isinstance(names, list):
            limits = tuple(str(n) for n in names)
        else:  # written before the names were recorded: the reason quotes each
            limits = tuple(_QUOTED.findall(str(data.get("reason") or "")))
        return Decision(Outcome.APPROVAL, None, approval, count, limits)
    return Decision(Outcome.DISPATCH, None, approval, count)


def original_resume(run: ActionRun, event: AuditEvent) -> Decision:
    """The decision recorded by the re-check before dispatch (``event`` in ``RESUMES``)."""
    if event.kind == AuditKind.APPROVED_DISPATCHING:
        return Decision(Outcome.DISPATCH)
    if event.kind == AuditKind.LIMIT_EXCEEDED:
        return Decision(Outcome.LIMIT_DENIED, Code.LIMIT_EXCEEDED, limits=denied_limits(run))
    return Decision(Outcome.REFUSED, event.code)


def changes(was: Decision, now: Decision, stage: Stage) -> list[Change]:
    """What would be decided otherwise, each kind with the replayed rule that decided it."""
    found: list[Change] = []
    rule = now.rule or ""
    if was.refused and not now.refused:
        found.append(Change(ChangeKind.DENIED_TO_ALLOWED, stage, rule))
    elif now.refused and not was.refused:
        kind = ChangeKind.ALLOWED_TO_DENIED
        if now.code == Code.ACTION_NOT_REGISTERED:
            kind = ChangeKind.ACTION_REMOVED
        elif now.code == Code.INPUT_VALIDATION_FAILED:
            kind = ChangeKind.INPUT_NO_LONGER_VALID
        found.append(Change(kind, stage, rule))
    elif was.refused and now.refused and was.code != now.code:
        kind = ChangeKind.DENY_CODE_CHANGED
        if now.code == Code.ACTION_NOT_REGISTERED:
            kind = ChangeKind.ACTION_REMOVED
        elif now.code == Code.INPUT_VALIDATION_FAILED:
            kind = ChangeKind.INPUT_NO_LONGER_VALID
        found.append(Change(kind, stage, rule))
    compared = Outcome.DUPLICATE not in (was.outcome, now.outcome)
    if (
        compared
        and not was.refused
        and not now.refused
        and None not in (was.approval, now.approval)
    ):
        approval_rule = now.approval_rule or ""
        if now.approval and not was.approval:
            found.append(Change(ChangeKind.APPROVAL_NEWLY_REQUIRED, stage, approval_rule))
        elif was.approval and not now.approval:
            found.append(Change(ChangeKind.APPROVAL_NO_LONGER_REQUIRED, stage, approval_rule))
        elif now.approval and None not in (was.needed, now.needed) and was.needed != now.needed:
            found.append(Change(ChangeKind.APPROVALS_NEEDED_CHANGED, stage, approval_rule))
    if was.reached_limits and now.reached_limits:
        for name in sorted(set(now.limits) - set(was.limits)):
            found.append(Change(ChangeKind.LIMIT_HIT_APPEARED, stage, f"limits.{name}"))
        for name in sorted(set(was.limits) - set(now.limits)):
            found.append(Change(ChangeKind.LIMIT_HIT_DISAPPEARED, stage, f"limits.{name}"))
    return found
