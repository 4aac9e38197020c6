"""A run's substance — what was proposed, how approvers amended it, what will run — and its
digests: the one owner of "the input that will run, as the approvers saw it".

Limits, every approver view, the decision and dispatch digests, the executor's context, the
agent's outcome and ``audit verify`` read a run's input through ``of(run)`` and nothing else:

- ``proposed``: the input as the proposer sent it (as stored: a refused proposal stores a bounded
  summary);
- ``amendments``: each approver's change (who, when, which fields, before and after, the run
  version it was written at and the digest of the input it left);
- ``will_run``: the input that is validated, checked, limited, shown for approval and executed —
  the last amendment's result, or the proposal when nobody amended it;
- ``changed_at``: the run version at which ``will_run`` last changed (1: as proposed). A decision
  made on a view older than that was made on something else (``APPROVAL_RUN_CHANGED``).

Digests are SHA-256 (hex) of the RFC 8785 canonical JSON of the value as stored
(``chain.chain_safe``), so anybody can recompute them from a stored run. The run's audit events
carry them (``facts``): ``proposed`` carries the proposed input's and the principal's (with the
tenant), a decision carries its own digest, a decision that amended carries the approved
input's and the amendment record's, a requester's confirmation carries its decision's
(``confirmation_digest``; the decision holds the digest of what was shown), every event of a finished run carries its result's and
output's. ``audit verify`` recomputes each from the stored run and
compares (``audit_check.substance_problems``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from signoff.core.chain import canonical_json, chain_safe, sha256_hex
from signoff.core.identity import Principal
from signoff.core.results import ExecutionResult, JsonObject
from signoff.core.run import ActionRun, Amendment, ApprovalDecision, ApprovalVote

INPUT_DIGEST = "input_digest"
APPROVED_INPUT_DIGEST = "approved_input_digest"
PRINCIPAL_DIGEST = "principal_digest"
RESULT_DIGEST = "result_digest"
OUTPUT_DIGEST = "output_digest"
DECISION_DIGEST = "decision_digest"
AMENDMENTS_DIGEST = "amendments_digest"
CONFIRMATION_DIGEST = "confirmation_digest"


def digest(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of a stored value."""
    return sha256_hex(canonical_json(chain_safe(value)))


def principal_digest(principal: Principal, tenant_id: str) -> str:
    """Whose authority the run carries, in which tenant."""
    return digest({"id": principal.id, "roles": sorted(principal.roles), "tenant_id": tenant_id})


def result_digest(result: ExecutionResult) -> str:
    """The recorded result as stored (its operator ``detail`` is never stored)."""
    return digest(result.model_dump(mode="json"))


def decision_digest(decision: ApprovalDecision) -> str:
    """One approver's decision as stored on the run."""
    return digest(decision.model_dump(mode="json"))


def confirmation_digest(run: ActionRun) -> str | None:
    """The requester's confirmation decision as stored on the run (``approval.confirm``)."""
    state = run.approval
    confirmation = state.confirmation if state is not None else None
    if confirmation is None or confirmation.decision is None:
        return None
    return decision_digest(confirmation.decision)


def amendments_digest(amendments: tuple[Amendment, ...]) -> str:
    """The amendment record as stored on the run (who, when, which fields, before, after)."""
    return digest([a.model_dump(mode="json") for a in amendments])


def amendment_facts(run: ActionRun) -> dict[str, str]:
    """What an event that amends ``run`` (or copies its amendments: a repair) chains."""
    if run.approved_input is None and not run.amendments:
        return {}
    return {
        APPROVED_INPUT_DIGEST: digest(will_run(run)),
        AMENDMENTS_DIGEST: amendments_digest(run.amendments),
    }


@dataclass(frozen=True, slots=True)
class Substance:
    proposed: JsonObject
    amendments: tuple[Amendment, ...]
    will_run: JsonObject
    changed_at: int

    @property
    def amended(self) -> bool:
        return bool(self.amendments)

    @property
    def proposed_digest(self) -> str:
        return digest(self.proposed)

    @property
    def will_run_digest(self) -> str:
        return digest(self.will_run)


def of(run: ActionRun) -> Substance:
    """``run``'s substance (the one way any part of signoff reads what will run)."""
    will_run = run.approved_input if run.approved_input is not None else run.input
    versions = [a.version for a in run.amendments if a.version is not None]
    return Substance(
        proposed=run.input,
        amendments=run.amendments,
        will_run=will_run,
        changed_at=max(versions, default=1),
    )


def will_run(run: ActionRun) -> JsonObject:
    """The input that is checked, shown, limited and executed."""
    return run.approved_input if run.approved_input is not None else run.input


def with_amendment(
    run: ActionRun, approver_id: str, changes: Mapping[str, Any], at: datetime
) -> ActionRun:
    """``run`` (not committed) with ``changes`` applied to what will run, recorded as an
    amendment written at the next version (the decision's compare-and-set)."""
    before = will_run(run)
    after = {**before, **changes}
    record = Amendment(
        approver_id=approver_id,
        at=at,
        changes={name: after[name] for name in changes},
        previous={name: before.get(name) for name in changes},
        version=run.version + 1,
        digest=digest(after),
    )
    return run.model_copy(update={"approved_input": after, "amendments": (*run.amendments, record)})


def facts(run: ActionRun, kind: str) -> dict[str, str]:
    """The substance digests an audit event of ``kind`` about ``run`` (as it now stands) chains."""
    found: dict[str, str] = {}
    if kind == "proposed":
        found[INPUT_DIGEST] = digest(run.input)
        found[PRINCIPAL_DIGEST] = principal_digest(run.principal, run.tenant_id)
        found.update(amendment_facts(run))  # a repair carries what was approved
    if run.is_terminal and run.result is not None:
        found[RESULT_DIGEST] = result_digest(run.result)
        found[OUTPUT_DIGEST] = digest(run.result.output)
    return found


def standing(run: ActionRun) -> tuple[ApprovalDecision, ...]:
    """The decisions that stand: made on what will run now (no amendment came after them) and
    under the revision the approval is asked under. A decision left behind stays on the record;
    its approver may decide again."""
    state = run.approval
    if state is None:
        return ()
    changed_at = of(run).changed_at
    return tuple(
        d
        for d in state.decisions
        if (d.seen is None or d.seen >= changed_at)
        and (d.revision is None or state.revision is None or d.revision == state.revision)
    )


def standing_approvers(run: ActionRun) -> set[str]:
    """Distinct approvers whose approval stands (what callers and approvers are shown; quorum is
    decided by ``approvals.py`` under the approver rule)."""
    return {d.approver_id for d in standing(run) if d.decision is ApprovalVote.APPROVE}
