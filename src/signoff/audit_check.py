"""The run half of ``signoff audit verify``: each run's events explain its stored state.

Each run's events must start with the proposal, belong to the run and its tenant, move only along
the transition table, end in the run's stored status, and record at most one terminal result.
Tamper evidence (hash chains, signed checkpoints) is ``signoff.audit.verify``. Each problem
carries a stable ``AuditProblemCode``; its text is for people.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum

from signoff.core.approval_digest import approval_digest, short_digest
from signoff.core.audit_events import AuditKind
from signoff.core.ports import AuditEvent, Store
from signoff.core.run import TERMINAL_STATUSES, ActionRun, RunStatus, can_transition
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


@dataclass(frozen=True)
class AuditProblem:
    run_id: str
    problem: str
    code: AuditProblemCode


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
    return problems


def digest_problems(run: ActionRun, events: list[AuditEvent]) -> list[str]:
    """Each approving decision recorded the digest of what it approved; the call that was
    dispatched (the run's stored input, resource, principal, tenant under the definition
    revision its dispatch event names) must have that digest."""
    dispatched = [e for e in events if e.kind == AuditKind.APPROVED_DISPATCHING]
    if not dispatched:
        return []
    revision = (dispatched[-1].data or {}).get("revision")
    executed = approval_digest(
        action_id=run.action_id,
        definition_revision=str(revision),
        input=run.input,
        resource=run.resource,
        principal_id=run.principal.id,
        principal_roles=run.principal.roles,
        tenant_id=run.tenant_id,
    )
    problems = []
    for e in events:
        data = e.data or {}
        digest = data.get("digest")
        approving = e.kind in (AuditKind.APPROVAL_RECORDED, AuditKind.APPROVED_DISPATCHING)
        approving = approving and data.get("vote") == "approve"
        if approving and isinstance(digest, str) and digest != executed:
            problems.append(
                f"the approval by {e.actor} (event seq {e.seq}) approved "
                f"{short_digest(digest)}, but the call dispatched is {short_digest(executed)}"
            )
    return problems


def undecodable_rows(store: Store) -> list[UndecodableRow] | None:
    """Rows the readers skipped so far because they could not be decoded (durable stores)."""
    faults = getattr(store, "decode_faults", None)
    return faults.rows() if isinstance(faults, DecodeFaults) else None
