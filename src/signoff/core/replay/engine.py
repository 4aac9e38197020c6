"""The replay itself: the stored history, event by event in the trail's order, decided again by
the pipeline's own stages under other definitions.

For each run's proposal (at the event closing its unit of work, which is where the pipeline
reserved its limits): ``admission.admit`` (key, schema, policy), ``limit_stage.checks_for`` and
``limits.reserve`` against the replay's ``WindowLedger`` — usage rebuilt from the replayed runs
before it, so a call the replay denies holds nothing and one it parks holds as the pipeline
holds it. Later events of a run the replay still follows move its reservations as the pipeline
moved them: an amendment re-checks and re-holds what will run; the re-check before dispatch
(``admission.recheck``, then the limits) is decided again and compared; a run that ends
without executing gives its reservations back.

Where the replayed world leaves the recorded one, the replay assumes the least: a run now
dispatched at once where it waited ran at its proposal; a run now waiting for approval where
it ran at once was approved at once; approvers' votes, guards, executors and the moment's
conditions (a full lane, the pending cap, a failed preview) are taken as recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from signoff.core import admission, limit_stage
from signoff.core.audit_events import AuditKind
from signoff.core.codes import Code
from signoff.core.limits import reserve
from signoff.core.policy import evaluate_policy
from signoff.core.ports import AuditEvent
from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.core.replay import rules
from signoff.core.replay.decision import (
    CLOSING,
    RESUMES,
    Decision,
    Outcome,
    Stage,
    changes,
    original_proposal,
    original_resume,
    screened,
)
from signoff.core.replay.report import ReplayReport
from signoff.core.replay.window import WindowLedger
from signoff.core.results import ExecutionResult, JsonObject
from signoff.core.run import TERMINAL_STATUSES, ActionRun, RunStatus


@dataclass(frozen=True, slots=True)
class ReplayScope:
    """Which runs are reported: proposed in ``[since, until]``, of one action, of one tenant."""

    since: datetime | None = None
    until: datetime | None = None
    action_id: str | None = None
    tenant_id: str | None = None

    def reports(self, run: ActionRun) -> bool:
        at = run.created_at
        return (
            (self.since is None or at >= self.since)
            and (self.until is None or at <= self.until)
            and (self.action_id is None or run.action_id == self.action_id)
        )


@dataclass(slots=True)
class _Followed:
    """A run whose recorded history the replay still follows (its reservations may move)."""

    run: ActionRun
    action: CompiledAction
    replayed: ActionRun
    waiting: bool
    reported: bool
    changed: bool
    amendments: int = 0


@dataclass(slots=True)
class Replayer:
    registry: ActionRegistry
    scope: ReplayScope
    report: ReplayReport
    ledger: WindowLedger = field(default_factory=WindowLedger)
    _units: dict[str, tuple[ActionRun, list[AuditEvent]]] = field(default_factory=dict)
    _followed: dict[str, _Followed] = field(default_factory=dict)

    @property
    def following(self) -> int:
        """Runs still followed (waiting, or running with a trail to come)."""
        return len(self._followed)

    def reported_following(self) -> bool:
        return any(f.reported for f in self._followed.values())

    async def on(self, event: AuditEvent, runs: dict[str, ActionRun]) -> None:
        """One event of the history, in ``seq`` order (``runs``: the stored runs whose
        ``proposed`` events are in this page). Another action's runs (``scope.action_id``)
        are passed over: they never count against this one's limits."""
        opened = self._units.get(event.run_id)
        if opened is not None:
            run, unit = opened
            unit.append(event)
            if event.kind in CLOSING:
                del self._units[event.run_id]
                await self._proposal(run, unit)
            return
        if event.kind == AuditKind.PROPOSED:
            stored = runs.get(event.run_id)
            if stored is None:
                if self._counts(event):
                    self.report.skip("run_not_stored")
            elif stored.repair_of is not None:  # an operator's re-dispatch, not a proposal
                if self.scope.reports(stored):
                    self.report.skip("repair")
            elif self.scope.action_id in (None, stored.action_id):
                self._units[event.run_id] = (stored, [event])
            return
        followed = self._followed.get(event.run_id)
        if followed is not None:
            await self._later(followed, event)

    def _counts(self, event: AuditEvent) -> bool:
        at = event.at
        return (self.scope.since is None or at >= self.scope.since) and (
            self.scope.until is None or at <= self.scope.until
        )

    # ------------------------------------------------------------- proposal
    async def _proposal(self, run: ActionRun, unit: list[AuditEvent]) -> None:
        reported = self.scope.reports(run)
        if screened(run, unit):
            if reported:
                self.report.skip("input_not_stored")
            return
        was = original_proposal(run, unit)
        action = self.registry.resolve(run.action_id)
        if reported:
            self.report.replaying(run, action)
        if action is None:
            now = Decision(Outcome.REFUSED, Code.ACTION_NOT_REGISTERED, rule="not defined")
            self._compare(run, None, Stage.PROPOSAL, was, now, run.input, reported, False)
            return
        now, replayed = await self._decide(action, run, was)
        changed = self._compare(run, action, Stage.PROPOSAL, was, now, run.input, reported, False)
        follows_wait = was.outcome is Outcome.APPROVAL and now.outcome is Outcome.APPROVAL
        follows_run = was.outcome is Outcome.DISPATCH and now.outcome in (
            Outcome.APPROVAL,
            Outcome.DISPATCH,
        )
        if follows_wait or follows_run:
            self._followed[run.run_id] = _Followed(
                run, action, replayed, follows_wait, reported, changed
            )

    async def _decide(
        self, action: CompiledAction, run: ActionRun, was: Decision
    ) -> tuple[Decision, ActionRun]:
        """The proposal decided again, as the pipeline's stages decide it."""
        at = run.created_at
        proposed = run.model_copy(
            update={"approved_input": None, "amendments": (), "resource": None, "approval": None}
        )
        if was.code == Code.IDEMPOTENCY_KEY_INVALID:  # the key itself is stored escaped
            return Decision(Outcome.REFUSED, was.code, rule="key"), proposed
        verdict = admission.admit(
            action, admission.policy_input(proposed, at), proposed.input, run.idempotency_key
        )
        if verdict.decision is None:
            assert verdict.refusal is not None
            refusal = verdict.refusal
            return Decision(
                Outcome.REFUSED, refusal.code, rule=rules.refusal_rule(refusal)
            ), proposed
        decision = verdict.decision
        if decision.denial is not None:
            rule = rules.denial_rule(action, decision)
            return Decision(Outcome.REFUSED, decision.denial.code, rule=rule), proposed
        approval_rule = rules.approval_rule(action, decision)
        asked = decision.approval_required
        needed = decision.approvals_needed
        placed = proposed.model_copy(update={"resource": decision.resource})

        def decided(outcome: Outcome, code: str | None = None, **more: object) -> Decision:
            rule = more.pop("rule", approval_rule)
            return Decision(
                outcome,
                code,
                asked,
                needed,
                rule=str(rule),
                approval_rule=approval_rule,
                **more,  # type: ignore[arg-type]
            )

        if was.outcome in (Outcome.DUPLICATE, Outcome.STOPPED):
            return decided(
                was.outcome, was.code
            ), placed  # the key's owner, the moment: as recorded
        checks = limit_stage.checks_for(action, placed, admission.policy_input(placed, at))
        if isinstance(checks, ExecutionResult):
            return Decision(Outcome.REFUSED, checks.code, rule="limits: sum"), placed
        limits = await reserve(self.ledger, checks, run.run_id, at)
        if limits.denied:
            names = tuple(u.check.spec.name for u in limits.denied)
            rule = rules.limits_rule(limits, denied=True)
            return decided(
                Outcome.LIMIT_DENIED, Code.LIMIT_EXCEEDED, limits=names, rule=rule
            ), placed
        exceeded = tuple(u.check.spec.name for u in limits.exceeded)
        # A requester confirmation waits like an approval (whoever the host could ask).
        if asked or exceeded or decision.confirmation_required:
            rule = (
                approval_rule if asked or not exceeded else rules.limits_rule(limits, denied=False)
            )
            return decided(Outcome.APPROVAL, limits=exceeded, rule=rule), placed
        return decided(Outcome.DISPATCH), placed

    # ---------------------------------------------------------- later events
    async def _later(self, followed: _Followed, event: AuditEvent) -> None:
        run_id = followed.run.run_id
        amended = followed.waiting and "amended" in (event.data or {})
        if amended:
            followed.amendments += 1
            followed.replayed = _amended(followed.replayed, followed.run, followed.amendments)
        if followed.waiting and event.kind in RESUMES:
            await self._resume(followed, event)
            return
        if amended:  # the amendment's own re-check, in the decision's unit
            replayed = followed.replayed
            request = admission.policy_input(replayed, event.at)
            checks = limit_stage.checks_for_run(followed.action, replayed, request)
            if not isinstance(checks, ExecutionResult):
                await reserve(self.ledger, checks, run_id, event.at)
        status = RunStatus(event.status) if event.status in _TERMINAL else None
        if status is not None:
            if limit_stage.never_executed(followed.run, status):
                await self.ledger.release(run_id)
            del self._followed[run_id]

    async def _resume(self, followed: _Followed, event: AuditEvent) -> None:
        """The re-check before dispatch, decided again at the moment it was recorded."""
        run, action, replayed = followed.run, followed.action, followed.replayed
        at = event.at
        was = original_resume(run, event)
        now: Decision
        if was.code == Code.APPROVAL_DIGEST_MISMATCH:
            now = was  # a digest binds the revision approved under: not the replay's to judge
        elif (refusal := admission.recheck(action, replayed, at)) is not None:
            decision = evaluate_policy(action, admission.policy_input(replayed, at))
            if decision.denial is not None:
                rule = rules.denial_rule(action, decision)
            elif refusal.code == Code.INPUT_VALIDATION_FAILED:
                rule = rules.refusal_rule(refusal)
            else:
                rule = "resource: the resource identity changed"
            now = Decision(Outcome.REFUSED, refusal.code, rule=rule)
        else:
            request = admission.policy_input(replayed, at)
            checks = limit_stage.checks_for_run(action, replayed, request)
            if isinstance(checks, ExecutionResult):
                now = Decision(Outcome.REFUSED, checks.code, rule="limits: sum")
            else:
                limits = await reserve(self.ledger, checks, run.run_id, at)
                if limits.denied:
                    names = tuple(u.check.spec.name for u in limits.denied)
                    rule = rules.limits_rule(limits, denied=True)
                    now = Decision(
                        Outcome.LIMIT_DENIED, Code.LIMIT_EXCEEDED, limits=names, rule=rule
                    )
                else:
                    now = Decision(Outcome.DISPATCH, rule="re-checked: allowed")
        shown = replayed.approved_input if replayed.approved_input is not None else replayed.input
        followed.changed = self._compare(
            run, action, Stage.DISPATCH, was, now, shown, followed.reported, followed.changed
        )
        if now.refused:
            await self.ledger.release(run.run_id)
            del self._followed[run.run_id]
        elif was.refused:
            del self._followed[run.run_id]  # it ran in the replay; the record has no more of it
        else:
            followed.waiting = False

    def _compare(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        stage: Stage,
        was: Decision,
        now: Decision,
        shown: JsonObject,
        reported: bool,
        changed: bool,
    ) -> bool:
        """Record what changed; returns whether the run has changed at any stage so far."""
        found = changes(was, now, stage)
        if not reported or not found:
            return changed
        if not changed:
            self.report.changed_run(run)
        self.report.add(run, action, found, was, now, shown)
        return True


_TERMINAL = frozenset(str(s) for s in TERMINAL_STATUSES)


def _amended(replayed: ActionRun, run: ActionRun, count: int) -> ActionRun:
    """``replayed`` with the first ``count`` recorded amendments applied to what will run."""
    values = dict(run.input)
    for amendment in run.amendments[:count]:
        values.update(amendment.changes)
    return replayed.model_copy(
        update={"approved_input": values, "amendments": run.amendments[:count]}
    )
