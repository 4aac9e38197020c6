"""The run half of ``signoff audit verify``: each run's events explain its stored state.

Each run's events must start with the proposal, belong to the run and its tenant, move only along
the transition table, end in the run's stored status, and record at most one terminal result;
the stored run's substance (input, principal and tenant, approved input, amendments, decisions,
result, output) must have the digests its events chain, and every standing approval must have
approved exactly what was dispatched.
Tamper evidence (hash chains, signed checkpoints) is ``signoff.audit.verify``. Each problem
carries a stable ``AuditProblemCode``; its text is for people.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum

from signoff.core import substance
from signoff.core.approval_digest import approval_digest, short_digest
from signoff.core.audit_events import AuditKind
from signoff.core.ports import AuditEvent, Store
from signoff.core.run import (
    TERMINAL_STATUSES,
    ActionRun,
    ApprovalVote,
    RunStatus,
    can_transition,
)
from signoff.store.faults import DecodeFaults, UndecodableRow

PAGE = 500


class AuditProblemCode(StrEnum):
    """What is wrong with a run's trail (stable across wording changes)."""

    NO_EVENTS = "AUDIT_NO_EVENTS"
    NOT_OPENED_BY_PROPOSAL = "AUDIT_NOT_OPENED_BY_PROPOSAL"
    OUT_OF_ORDER = "AUDIT_OUT_OF_ORDER"
    FOREIGN_EVENT = "AUDIT_FOREIGN_EVENT"
    UNKNOWN_STATUS = "AUDIT_UNKNOWN_STATUS"
    FORBIDDEN_MOVE = "AUDIT_FORBIDDEN_MOVE"
    STATUS_MISMATCH = "AUDIT_STATUS_MISMATCH"
    ENDED_TWICE = "AUDIT_ENDED_TWICE"
    DIGEST_MISMATCH = "AUDIT_DIGEST_MISMATCH"
    SUBSTANCE_MISMATCH = "AUDIT_SUBSTANCE_MISMATCH"


@dataclass(frozen=True)
class AuditProblem:
    run_id: str
    problem: str
    code: AuditProblemCode
    seq: int | None = None
    """Where it shows (``None``: the run's first event): a stored state judged against all of
    its events is placed at its last one, so damage to an event earlier on is named first."""


async def runs_with_events(
    store: Store, tenant_id: str | None = None
) -> AsyncIterator[tuple[ActionRun, list[AuditEvent]]]:
    """Every run (newest first) with its events, page by page."""
    before: str | None = None
    while True:
        async with store.unit() as unit:
            page = await unit.runs.list(tenant_id=tenant_id, limit=PAGE, before_run_id=before)
            trails = [await unit.audit.list_for_run(run.run_id) for run in page]
        for run, events in zip(page, trails, strict=True):
            yield run, events
        if len(page) < PAGE:
            return
        before = page[-1].run_id


def check_trail(run: ActionRun, events: list[AuditEvent]) -> list[AuditProblem]:
    problems: list[AuditProblem] = []

    def found(code: AuditProblemCode, text: str) -> None:
        problems.append(AuditProblem(run.run_id, text, code))

    if not events:
        return [AuditProblem(run.run_id, "no audit events", AuditProblemCode.NO_EVENTS)]
    if events[0].kind != AuditKind.PROPOSED:
        found(
            AuditProblemCode.NOT_OPENED_BY_PROPOSAL,
            f"first event is {events[0].kind!r}, not {AuditKind.PROPOSED.value!r}",
        )
    seqs = [e.seq for e in events if e.seq is not None]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        found(AuditProblemCode.OUT_OF_ORDER, "events are out of order")
    if any(e.run_id != run.run_id or e.tenant_id != run.tenant_id for e in events):
        found(AuditProblemCode.FOREIGN_EVENT, "an event names another run or tenant")
    statuses: list[RunStatus] = []
    for event in events:
        try:
            statuses.append(RunStatus(event.status or ""))
        except ValueError:
            found(
                AuditProblemCode.UNKNOWN_STATUS,
                f"event {event.kind!r} has unknown status {event.status!r}",
            )
    for before, after in itertools.pairwise(statuses):
        if before != after and not can_transition(before, after):
            found(
                AuditProblemCode.FORBIDDEN_MOVE,
                f"events move {before} -> {after}, which the table forbids",
            )
    if statuses and statuses[-1] != run.status:
        found(
            AuditProblemCode.STATUS_MISMATCH,
            f"last event says {statuses[-1]} but the run is {run.status}",
        )
    terminal_events = [s for s in statuses if s in TERMINAL_STATUSES]
    if len(terminal_events) > 1:
        found(
            AuditProblemCode.ENDED_TWICE,
            f"{len(terminal_events)} terminal events; a run ends once",
        )
    for text in digest_problems(run, events):
        found(AuditProblemCode.DIGEST_MISMATCH, text)
    last_seq = max((e.seq or 0 for e in events), default=0)
    for text in substance_problems(run, events):
        problems.append(
            AuditProblem(run.run_id, text, AuditProblemCode.SUBSTANCE_MISMATCH, seq=last_seq)
        )
    return problems


def digest_problems(run: ActionRun, events: list[AuditEvent]) -> list[str]:
    """Each standing approval recorded the digest of what it approved; the call that was
    dispatched (what will run — the approved input after an amendment —, resource, principal,
    tenant under the definition revision its dispatch event names) must have that digest."""
    dispatched = [e for e in events if e.kind == AuditKind.APPROVED_DISPATCHING]
    if not dispatched:
        return []
    last = dispatched[-1].data or {}
    executed = approval_digest(
        action_id=run.action_id,
        definition_revision=str(last.get("revision")),
        input=substance.will_run(run),
        resource=run.resource,
        principal_id=run.principal.id,
        principal_roles=run.principal.roles,
        tenant_id=run.tenant_id,
    )
    problems = []
    claimed = last.get("executed_digest")
    ran = claimed if isinstance(claimed, str) else executed
    if ran != executed:
        problems.append(
            f"the stored run describes {short_digest(executed)}, not the call its dispatch "
            f"event (seq {dispatched[-1].seq}) ran ({short_digest(ran)}): it was edited"
        )
    for decision in substance.standing(run):
        if decision.decision is not ApprovalVote.APPROVE or decision.digest is None:
            continue
        if decision.digest != ran:
            problems.append(
                f"the approval by {decision.approver_id} approved "
                f"{short_digest(decision.digest)}, but the call dispatched is {short_digest(ran)}"
            )
    return problems


# Events that record an approver's decision on the run (an amendment over an approval limit is
# recorded without its vote: ``AMENDED_OVER_LIMIT``).
_DECIDING = frozenset(
    {
        AuditKind.APPROVAL_RECORDED,
        AuditKind.APPROVAL_REJECTED,
        AuditKind.APPROVED_DISPATCHING,
        AuditKind.APPROVED_AWAITING_DISPATCH,
        AuditKind.RESUME_REFUSED,
        AuditKind.LIMIT_EXCEEDED,
    }
)


def substance_problems(run: ActionRun, events: list[AuditEvent]) -> list[str]:
    """The stored run's substance — proposed input, principal and tenant, approved input and
    amendments, decisions, the requester's confirmation, result and output — against the digests its chained events carry
    (``core/substance.py``). A run proposed before the digests existed is not judged here."""
    opened = events[0].data if events and events[0].kind == AuditKind.PROPOSED else None
    if not opened or substance.INPUT_DIGEST not in opened:
        return []
    problems: list[str] = []

    def differs(what: str, chained: object, stored: object) -> None:
        if chained != stored:
            problems.append(f"its stored {what} is not what its events chained: it was edited")

    differs("input", opened.get(substance.INPUT_DIGEST), substance.digest(run.input))
    differs(
        "principal or tenant",
        opened.get(substance.PRINCIPAL_DIGEST),
        substance.principal_digest(run.principal, run.tenant_id),
    )
    amended = substance.amendment_facts(run)
    chained = [e.data for e in events if e.data and substance.AMENDMENTS_DIGEST in e.data]
    last = chained[-1] if chained else {}
    for key, what in (
        (substance.APPROVED_INPUT_DIGEST, "approved input"),
        (substance.AMENDMENTS_DIGEST, "amendments"),
    ):
        differs(what, last.get(key), amended.get(key))
    decided = sorted(
        str((e.data or {}).get(substance.DECISION_DIGEST))
        for e in events
        if e.kind in _DECIDING and substance.DECISION_DIGEST in (e.data or {})
    )
    decisions = run.approval.decisions if run.approval is not None else ()
    differs("decisions", decided, sorted(substance.decision_digest(d) for d in decisions))
    confirmed = [
        e.data[substance.CONFIRMATION_DIGEST]
        for e in events
        if e.data and substance.CONFIRMATION_DIGEST in e.data
    ]
    differs(
        "requester confirmation",
        confirmed[-1] if confirmed else None,
        substance.confirmation_digest(run),
    )
    results = [e.data for e in events if e.data and substance.RESULT_DIGEST in e.data]
    if run.result is not None or results:
        ended = results[-1] if results else {}
        stored = run.result
        differs(
            "result",
            ended.get(substance.RESULT_DIGEST),
            substance.result_digest(stored) if stored is not None else None,
        )
        differs(
            "output",
            ended.get(substance.OUTPUT_DIGEST),
            substance.digest(stored.output) if stored is not None else None,
        )
    return problems


def undecodable_rows(store: Store) -> list[UndecodableRow] | None:
    """Rows the readers skipped so far because they could not be decoded (durable stores)."""
    faults = getattr(store, "decode_faults", None)
    return faults.rows() if isinstance(faults, DecodeFaults) else None
