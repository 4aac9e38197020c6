"""``Approvals``: decisions, quorum, resume and expiry of runs waiting for approval.

Approval is data on the run, decided by compare-and-set: concurrent approvers each re-read and
re-apply, so exactly one of them moves the run to RUNNING and dispatches. Resume never reserves
again; it re-resolves the definition, re-validates the stored input, re-evaluates current policy,
and the guard runs immediately before dispatch.

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

from signoff.core import admission, limit_stage, substance
from signoff.core.amendments import AmendmentRefused, amended
from signoff.core.answers import outcome_of, terminal_status_for
from signoff.core.approval_digest import short_digest
from signoff.core.audit_events import Actor, AuditKind, Decision
from signoff.core.background import Notifications
from signoff.core.codes import Code
from signoff.core.definition import ExecutorMode
from signoff.core.dispatcher import Dispatcher
from signoff.core.identity import Channel, Principal
from signoff.core.ledger import MAX_CAS_ATTEMPTS, RunLedger
from signoff.core.limits import LimitCheck, LimitDecision
from signoff.core.ports import Clock
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.results import ActionOutcome, ExecutionResult
from signoff.core.run import (
    ActionRun,
    ApprovalDecision,
    ApprovalState,
    ApprovalVote,
    RunStatus,
)

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
    whatever names it gives. Surfaces use it only to decide what to show.
    """
    state = run.approval
    if state is None or state.approved_at is not None:
        return Code.APPROVAL_NOT_PENDING
    if approver.id == run.principal.id or not approver.has_any_role(state.approver_roles):
        return Code.APPROVER_NOT_ELIGIBLE
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
    every standing approval recorded."""
    now_digest = limit_stage.digest_of(action, run)
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
class _Plan:
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


class Approvals:
    """Owns the approval stage: recording decisions, quorum, resume and expiry."""

    def __init__(
        self,
        registry: ActionRegistry,
        ledger: RunLedger,
        dispatcher: Dispatcher,
        notifications: Notifications,
        clock: Clock,
        fleet_ttl: timedelta = FLEET_TTL,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._dispatcher = dispatcher
        self._notifications = notifications
        self._clock = clock
        self._fleet_ttl = fleet_ttl

    async def _held(self, action_id: str, now: datetime) -> set[str]:
        """The revisions of ``action_id`` live instances hold (heartbeats within the TTL)."""
        return await self._ledger.revisions_held(action_id, now - self._fleet_ttl)

    async def decide(self, run_id: str, tenant_id: str, request: DecisionRequest) -> DecisionResult:
        """Record one approver's decision; on the last needed approval, resume and dispatch."""
        for _ in range(MAX_CAS_ATTEMPTS):
            run = await self._ledger.load_in(run_id, tenant_id)
            refused = await self._refusal(run, run_id, request)
            if refused is not None:
                return refused
            assert run is not None
            try:
                plan = await self._plan(run, request)
            except AmendmentRefused as refusal:
                return DecisionResult(refusal.code, outcome_of(run), False, str(refusal))
            try:
                answer = await self._record(plan, request)
            except OverLimit as over:
                return DecisionResult(
                    Code.LIMIT_EXCEEDED, outcome_of(run), False, over.result.message
                )
            if answer is not None:
                return answer
        raise RuntimeError(f"decide on {run_id}: too much contention")

    async def _refusal(
        self, run: ActionRun | None, run_id: str, request: DecisionRequest
    ) -> DecisionResult | None:
        """Why this decision is answered without writing it, or ``None``."""
        if run is None:
            return DecisionResult(Code.ACTION_RUN_NOT_FOUND, None, accepted=False)
        if run.status is not RunStatus.WAITING_APPROVAL or run.approval is None:
            code = (
                Code.APPROVAL_EXPIRED
                if run.status is RunStatus.EXPIRED
                else Code.APPROVAL_NOT_PENDING
            )
            return DecisionResult(code, outcome_of(run), accepted=False)
        if self.overdue(run):
            await self.expire(run)
            current = await self._ledger.truth(run_id)
            return DecisionResult(Code.APPROVAL_EXPIRED, current, accepted=False)
        if stale_view(run, request.expected_version):
            return DecisionResult(Code.APPROVAL_RUN_CHANGED, outcome_of(run), accepted=False)
        operator = request.via if request.channel is Channel.CLI else None
        refusal = approver_refusal(run, request.approver, operator=operator)
        if refusal is not None:
            return DecisionResult(refusal, outcome_of(run), accepted=False)
        return None

    async def _plan(self, run: ActionRun, request: DecisionRequest) -> _Plan:
        """The decision worked out in memory: the amendment and its limits, the revision it is
        made under, the digest it approves. Raises ``AmendmentRefused``."""
        now = self._clock.now()
        approver = request.approver
        action = self._registry.resolve(run.action_id)
        changed, limits = run, []
        if request.amendments is not None:
            if request.vote is not ApprovalVote.APPROVE or action is None:
                raise AmendmentRefused(
                    Code.AMENDMENT_NOT_ALLOWED, "Only an approval can amend the input."
                )
            changed = amended(action, run, approver.id, request.amendments, now)
            checks = limit_stage.checks_for(action, changed, admission.policy_input(changed, now))
            if isinstance(checks, ExecutionResult):
                raise AmendmentRefused(Code.AMENDMENT_INVALID, checks.message)
            limits = checks
        asked = changed.approval.revision if changed.approval is not None else None
        state, elsewhere = await self._asked_under(action, changed, now)
        revision = state.revision
        refusal = None
        if action is not None and asked not in (None, revision):
            refusal = admission.recheck(action, changed, now)
        digest: str | None = state.digest
        if action is not None and revision is not None:
            digest = limit_stage.digest_of(action, changed, revision=revision)
        if changed is not run:
            state = state.model_copy(update={"digest": digest})
        decision = ApprovalDecision(
            approver_id=approver.id,
            roles=approver.roles,
            decision=request.vote,
            reason=request.reason,
            at=now,
            channel=request.channel,
            via=request.via,
            digest=digest,
            revision=revision,
            seen=substance.of(changed).changed_at,
        )
        state = state.model_copy(update={"decisions": (*state.decisions, decision)})
        changed = changed.model_copy(update={"approval": state})
        audit: dict[str, Any] = {
            "vote": str(request.vote),
            "reason": request.reason,
            "via": request.via,
            "digest": digest,
            "revision": revision,
            substance.DECISION_DIGEST: substance.decision_digest(decision),
        }
        if changed.amendments != run.amendments:
            last = changed.amendments[-1]
            audit["amended"] = {"changes": last.changes, "previous": last.previous}
            audit.update(substance.amendment_facts(changed))
        return _Plan(run, changed, action, decision, audit, limits, elsewhere, refusal=refusal)

    async def _asked_under(
        self, action: CompiledAction | None, run: ActionRun, now: datetime
    ) -> tuple[ApprovalState, bool]:
        """The approval state with the revision decisions are made under, and whether another
        instance (holding that revision) dispatches it."""
        state = run.approval
        assert state is not None
        if action is None:
            return state, False
        asked = state.revision
        if asked is None or asked == action.revision:
            return state.model_copy(update={"revision": action.revision}), False
        if asked in await self._held(run.action_id, now):
            return state, True
        return self._asked_again(action, run, state), False

    @staticmethod
    def _asked_again(action: CompiledAction, run: ActionRun, state: ApprovalState) -> ApprovalState:
        """The approval asked again under ``action``'s revision: the revision it was asked under
        is gone from the fleet, so earlier decisions (kept on the record) no longer count."""
        return state.model_copy(
            update={
                "revision": action.revision,
                "digest": limit_stage.digest_of(action, run),
                "approved_at": None,
            }
        )

    async def _record(self, plan: _Plan, request: DecisionRequest) -> DecisionResult | None:
        """Write the decision (and what it leads to); ``None``: the race was lost, re-read."""
        run, changed, action = plan.run, plan.changed, plan.action
        approver_id = request.approver.id
        now = self._clock.now()
        if request.vote is ApprovalVote.REJECT:
            result = ExecutionResult.denied(
                Code.APPROVAL_REJECTED, request.reason or "Rejected by an approver."
            )
            outcome = await self._ledger.terminal(
                run,
                result,
                AuditKind.APPROVAL_REJECTED,
                actor=approver_id,
                data=plan.audit,
                approval=plan.state,
            )
            if outcome is None:
                return None
            self._notifications.decided(run.run_id, Decision.REJECTED)
            return DecisionResult(Code.APPROVAL_REJECTED, outcome, accepted=True)

        if plan.refusal is not None:  # asked again under a definition that now refuses it
            outcome = await self._ledger.terminal(
                changed,
                plan.refusal,
                AuditKind.RESUME_REFUSED,
                actor=approver_id,
                data=plan.audit,
                approval=plan.state,
            )
            return None if outcome is None else DecisionResult(outcome.code, outcome, True)
        if action is not None and not self._quorum(action, changed):
            return await self._waiting(
                plan, changed.advance(RunStatus.WAITING_APPROVAL, now), AuditKind.APPROVAL_RECORDED
            )
        if not request.dispatch or plan.elsewhere:
            # Recorded as approved; the run keeps waiting until a serving process holding the
            # revision it was approved under resumes it (``dispatch_approved``).
            approved = plan.state.model_copy(update={"approved_at": now})
            return await self._waiting(
                plan,
                changed.advance(RunStatus.WAITING_APPROVAL, now, approval=approved),
                AuditKind.APPROVED_AWAITING_DISPATCH,
            )
        outcome = await self._resume(changed, action, approver_id, plan.audit, base=plan)
        if outcome is None:
            return None
        if plan.parked:
            self._notifications.decided(run.run_id, Decision.RECORDED)
            return DecisionResult(Code.AMENDMENT_OVER_LIMIT, outcome, accepted=True)
        self._notifications.decided(run.run_id, Decision.APPROVED)
        return DecisionResult(outcome.code, outcome, accepted=True)

    async def _waiting(
        self, plan: _Plan, updated: ActionRun, kind: AuditKind
    ) -> DecisionResult | None:
        """The run keeps waiting with the decision recorded (or approved for dispatch elsewhere)."""
        stored = await self._ledger.cas(
            plan.run,
            updated,
            kind,
            actor=plan.decision.approver_id,
            data=plan.audit,
            limits=plan.limits,
            on_limits=self._amended_limits(plan, updated, kind) if plan.limits else None,
        )
        if stored is None:
            return None
        if plan.parked:
            self._notifications.decided(plan.run.run_id, Decision.RECORDED)
            return DecisionResult(Code.AMENDMENT_OVER_LIMIT, outcome_of(stored), accepted=True)
        if kind is AuditKind.APPROVED_AWAITING_DISPATCH:
            self._notifications.decided(plan.run.run_id, Decision.APPROVED)
            return DecisionResult(Code.APPROVAL_AWAITING_DISPATCH, outcome_of(stored), True)
        self._notifications.decided(plan.run.run_id, Decision.RECORDED)
        return DecisionResult(Code.APPROVAL_RECORDED, outcome_of(stored), accepted=True)

    def _amended_limits(
        self, plan: _Plan, updated: ActionRun, kind: AuditKind
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

    @staticmethod
    def _quorum(action: CompiledAction, run: ActionRun) -> bool:
        """Quorum of standing approvals under the *current* approver rule as well as the one the
        run was created with."""
        state = run.approval
        assert state is not None
        spec = action.definition.approval
        roles = set(state.approver_roles) & set(spec.approver_roles) or set(spec.approver_roles)
        approvers = {
            d.approver_id
            for d in substance.standing(run)
            if d.decision is ApprovalVote.APPROVE
            and d.approver_id != run.principal.id
            and roles.intersection(d.roles)
        }
        return len(approvers) >= max(state.count, spec.count)

    async def _resume(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        approver_id: str,
        audit: Mapping[str, Any],
        *,
        base: _Plan | None = None,
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
            on_limits = self._amended_limits(base, dispatching, AuditKind.APPROVED_DISPATCHING)
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

    # ------------------------------------------------------------------ expiry
    def overdue(self, run: ActionRun) -> bool:
        """Waiting for approval past its deadline (expired by the next read or the sweeper)."""
        return is_overdue(run, self._clock.now())

    async def expire(self, run: ActionRun) -> bool:
        """Move an overdue run to EXPIRED; ``False`` when another write got there first."""
        result = ExecutionResult.denied(Code.APPROVAL_EXPIRED, "Nobody approved it in time.")
        outcome = await self._ledger.terminal(
            run, result, AuditKind.APPROVAL_EXPIRED, actor=Actor.SIGNOFF
        )
        if outcome is not None:
            self._notifications.decided(run.run_id, Decision.EXPIRED)
        return outcome is not None

    async def settled(self, run: ActionRun) -> ActionRun:
        """``run`` as a reader should see it: an overdue approval is expired first."""
        if not self.overdue(run):
            return run
        await self.expire(run)
        current = await self._ledger.load(run.run_id)
        assert current is not None
        return current

    async def expire_overdue(self, limit: int = 1000) -> int:
        """The sweeper: move every overdue approval of every tenant to EXPIRED, reading the
        waiting runs ``limit`` at a time, oldest first, to the end (a flood of new requests never
        shields an old one). Returns how many it moved."""
        moved = 0
        async for run in self._ledger.every(RunStatus.WAITING_APPROVAL, limit):
            if self.overdue(run) and await self.expire(run):
                moved += 1
        return moved

    async def dispatch_approved(self, limit: int = 200) -> int:
        """A serving process's chore: resume every run approved without dispatch (a CLI decision
        on the database, or approved under a revision this process holds while another decided
        it), exactly as if its last approval had arrived here — re-resolve, re-validate,
        re-evaluate policy, guard, dispatch. The compare-and-set into RUNNING lets exactly one
        process dispatch it. A run approved under a revision no live instance holds any more is
        asked again under this one's. Returns how many this call resumed, settled or re-asked."""
        resumed = 0
        async for run in self._ledger.every(RunStatus.WAITING_APPROVAL, limit):
            state = run.approval
            if state is None or state.approved_at is None:
                continue
            action = self._registry.resolve(run.action_id)
            if action is not None and state.revision not in (None, action.revision):
                resumed += await self._hand_over_or_ask_again(action, run)
                continue
            standing = [d for d in substance.standing(run) if d.decision is ApprovalVote.APPROVE]
            last = standing[-1].approver_id if standing else "signoff"
            outcome = await self._resume(run, action, last, {"via": "dispatch_approved"})
            resumed += outcome is not None
        return resumed

    async def _hand_over_or_ask_again(self, action: CompiledAction, run: ActionRun) -> bool:
        """An approved run waits for an instance holding the revision it was approved under;
        when none is alive any more, its approval is asked again under ours (or refused, when
        ours refuses it). ``True`` when this process settled or re-asked it."""
        state = run.approval
        assert state is not None
        now = self._clock.now()
        if state.revision in await self._held(run.action_id, now):
            return False
        refusal = admission.recheck(action, run, now)
        if refusal is not None:  # no need to ask anyone: the current definition refuses it
            outcome = await self._ledger.terminal(
                run, refusal, AuditKind.RESUME_REFUSED, actor=Actor.SIGNOFF, approval=state
            )
            return outcome is not None
        again = self._asked_again(action, run, state)
        stored = await self._ledger.cas(
            run,
            run.advance(RunStatus.WAITING_APPROVAL, now, approval=again),
            AuditKind.APPROVAL_ASKED_AGAIN,
            actor=Actor.SIGNOFF,
            data={"was": state.revision, "revision": action.revision, "digest": again.digest},
        )
        if stored is None:
            return False
        self._notifications.requested(stored)
        return True
