"""What an approver's decision is, and the rules it is judged by, decided in memory.

``DecisionRequest`` / ``DecisionResult`` are what a surface hands over and gets back;
``approver_refusal`` (who may decide), ``stale_view`` (a decision bound to the version shown),
``is_overdue`` and ``digest_refusal`` (dispatch runs exactly what was approved) are the one
statement of each rule; ``Plan`` is one decision worked out before anything is written, and
``amended_limits`` what an amendment's limit re-check in the decision's unit leads to. Nothing
here writes; ``approvals.py`` and ``resume.py`` do.

A decision is bound to what the approver saw (contract §12):

- it names the run version it was shown (``expected_version``); when the run moved on since
  (another decision, an amendment), it is refused ``APPROVAL_RUN_CHANGED`` and nothing is
  written — the approver decides again on the fresh view, which every surface shows at once;
- it records the digest of what will run, under the definition revision the approval is asked
  under, and which version of what will run it saw; only decisions on what will run now stand
  (``substance.standing``): an amendment leaves earlier approvals behind, and their approvers may
  decide again;
- an amendment re-checks every cumulative limit with the amended value in the decision's own unit
  of work and replaces the held amount: over a ``deny`` limit the amendment is refused
  (``LIMIT_EXCEEDED``, nothing written), over an ``approval`` limit it is recorded with the
  limit's reason and this approval is not counted (``AMENDMENT_OVER_LIMIT``) — never executed.

Mixed revisions (a fleet mid-upgrade): approvals are asked under one definition revision. An
instance holding another revision records decisions under the asked revision and leaves the
dispatch to an instance that holds it (``APPROVAL_AWAITING_DISPATCH``); when no live instance
holds it any more, the approval is asked again under the deciding instance's revision (earlier
decisions stay on the record and no longer count). A valid approval is never denied for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from signoff.core import limit_stage, substance
from signoff.core.approval_digest import short_digest
from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code
from signoff.core.identity import Channel, Principal
from signoff.core.limits import LimitCheck, LimitDecision
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import ActionRun, ApprovalDecision, ApprovalState, ApprovalVote, RunStatus

FLEET_TTL = timedelta(seconds=60)
"""How recent an instance's heartbeat must be for the revisions it holds to count as live."""


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """An approver's decision as a surface hands it over; identity from trusted context."""

    approver: Principal
    vote: ApprovalVote
    reason: str = ""
    channel: Channel = Channel.API
    via: str | None = None
    # The run version the approver was shown. Every surface passes it: a decision on a view of
    # another version is refused (``APPROVAL_RUN_CHANGED``). ``None`` only for trusted
    # in-process callers that decide on the run as it stands.
    expected_version: int | None = None
    # Approve with these input fields changed (only those ``approval.amend`` lists).
    amendments: Mapping[str, Any] | None = None
    # False: the decision is only recorded; a serving process dispatches an approved run
    # (``dispatch_approved``). Surfaces without an executing process (the CLI) use it.
    dispatch: bool = True


@dataclass(frozen=True, slots=True)
class DecisionResult:
    """``code`` says what happened to the decision; ``outcome`` is the run as it now stands;
    ``message`` (when set) explains a refusal to the approver in safe words."""

    code: str
    outcome: ActionOutcome | None
    accepted: bool
    message: str = ""


class OverLimit(Exception):
    """An amendment would exceed a ``deny`` limit: raised inside the decision's unit, which then
    writes nothing."""

    def __init__(self, result: ExecutionResult) -> None:
        super().__init__(result.message)
        self.result = result


def approver_refusal(
    run: ActionRun, approver: Principal, *, operator: str | None = None
) -> Code | None:
    """Why ``approver`` may not decide this pending run, or ``None`` if they may.

    The one statement of the rule: an approver holds a role the approval names, is never the
    proposer, and decides once on what will run (an amendment after their decision lets them
    decide again); an approved run awaiting dispatch takes no more decisions; and one
    ``operator`` (the OS user behind a CLI decision) casts at most one standing vote per run,
    whatever names it gives; a run whose requester has not confirmed it yet
    (``approval.confirm``) takes no approver's decision. Surfaces use it only to decide what to show.
    """
    state = run.approval
    if state is None or state.approved_at is not None:
        return Code.APPROVAL_NOT_PENDING
    if approver.id == run.principal.id or not approver.has_any_role(state.approver_roles):
        return Code.APPROVER_NOT_ELIGIBLE
    if state.awaits_confirmation:  # approvers decide on what the requester confirmed
        return Code.CONFIRMATION_REQUIRED
    standing = substance.standing(run)
    if any(d.approver_id == approver.id for d in standing):
        return Code.APPROVAL_ALREADY_DECIDED
    if operator is not None and any(
        d.channel is Channel.CLI and d.via == operator for d in standing
    ):
        return Code.APPROVAL_ALREADY_DECIDED
    return None


def stale_view(run: ActionRun, expected_version: int | None) -> bool:
    """The approver was shown another version of the run than the one stored now (it moved on:
    another decision, an amendment, an approval asked again)."""
    return expected_version is not None and expected_version != run.version


def still_needed(run: ActionRun) -> int:
    """How many more approvals the run waits for, counted over the decisions that stand (an
    approval left behind by a later amendment counts no more): what every surface shows."""
    state = run.approval
    if (
        state is None
        or state.approved_at is not None
        or run.status is not RunStatus.WAITING_APPROVAL
    ):
        return 0
    return max(0, state.count - len(substance.standing_approvers(run)))


def is_overdue(run: ActionRun, now: datetime) -> bool:
    """Waiting for approval past its deadline (the one statement of "overdue")."""
    return (
        run.status is RunStatus.WAITING_APPROVAL
        and run.approval is not None
        and run.approval.overdue(now)
    )


def digest_refusal(
    action: CompiledAction, run: ActionRun, state: ApprovalState
) -> ExecutionResult | None:
    """Dispatch runs exactly what was approved: the digest recomputed now (the definition
    revision dispatching it, what will run, resource, principal, tenant) must equal the digest
    every standing approval recorded, and a requester confirmation asked for the run must have
    accepted exactly what will run."""
    now_digest = limit_stage.digest_of(action, run)
    confirmation = state.confirmation
    if confirmation is not None and (
        not confirmation.accepted or confirmation.shown != substance.of(run).will_run_digest
    ):  # the requester confirmed something else (or nothing): never run it
        return ExecutionResult.denied(
            Code.APPROVAL_DIGEST_MISMATCH,
            "What would run is not what the requester confirmed; nothing ran.",
        )
    standing = substance.standing(run.model_copy(update={"approval": state}))
    approved = [
        d.digest for d in standing if d.decision is ApprovalVote.APPROVE and d.digest is not None
    ]
    mismatch = next((d for d in approved if d != now_digest), None)
    if mismatch is None:  # also: votes cast before digests existed
        return None
    return ExecutionResult.denied(
        Code.APPROVAL_DIGEST_MISMATCH,
        f"What would run ({short_digest(now_digest)}) is not what was approved "
        f"({short_digest(mismatch)}); nothing ran.",
    ).model_copy(update={"output": {"approved": mismatch, "now": now_digest}})


@dataclass
class Plan:
    """One decision worked out in memory before anything is written."""

    run: ActionRun
    """As loaded: the compare-and-set starts from its version."""
    changed: ActionRun
    """With the amendment (if any) and the decision applied; not committed."""
    action: CompiledAction | None
    decision: ApprovalDecision
    audit: dict[str, Any]
    limits: list[LimitCheck] = field(default_factory=list)
    """Re-checked in the decision's unit when the decision amends."""
    elsewhere: bool = False
    """Asked under a revision another live instance holds: that instance dispatches."""
    parked: bool = False
    """Set inside the unit when the amendment went over an approval limit."""
    refusal: ExecutionResult | None = None
    """Asked again under the current definition, which refuses the run."""

    @property
    def state(self) -> ApprovalState:
        assert self.changed.approval is not None
        return self.changed.approval

    @property
    def amends(self) -> bool:
        return bool(self.limits) or self.changed.amendments != self.run.amendments


def amended_limits(
    plan: Plan, updated: ActionRun, kind: AuditKind
) -> Callable[[LimitDecision], tuple[ActionRun, AuditKind]]:
    """What an amendment's limit re-check (in the decision's unit) leads to."""
    names = tuple(check.spec.name for check in plan.limits)
    now = updated.updated_at

    def on_limits(verdict: LimitDecision) -> tuple[ActionRun, AuditKind]:
        if verdict.denied:
            raise OverLimit(limit_stage.denial(verdict))
        if verdict.exceeded:
            # What will run is over an approval limit: recorded with that reason for an
            # approval given on this view; this approver's vote does not count.
            plan.parked = True
            state = plan.state
            parked = state.model_copy(
                update={
                    "decisions": state.decisions[:-1],
                    "reason": limit_stage.approval_reason(verdict),
                    "approved_at": None,
                }
            )
            return plan.changed.advance(
                RunStatus.WAITING_APPROVAL, now, approval=parked, limits_held=names
            ), AuditKind.AMENDED_OVER_LIMIT
        return updated.model_copy(update={"limits_held": names}), kind

    return on_limits
