"""``signoff audit verify``: the chain, the checkpoints and the runs, checked from the store.

What is checked, in this order (``docs/audit.md`` states the same rule for an auditor):

1. Chain links, event by event in ``seq`` order: each tenant's events are numbered 1, 2, 3 ...
   without gaps or repeats, each ``prev_hash`` is the hash of the event before it (64 zeros for
   the first), and each ``hash`` is the SHA-256 of the event's canonical body. An event without a
   chain link after the pre-chain cut-off was inserted outside the chain.
2. Heads: each tenant's recorded head is the last event of its chain (a shorter chain lost its
   tail).
3. Checkpoints: each signature verifies with the key ring (when one is given) and the event at
   the checkpoint's number still has the signed hash (a chain that ends before it was truncated).
   A checkpoint signed in a round is listed by that round.
4. Rounds (``audit/rounds_check.py``): numbered 1, 2, 3 ... without gaps, each linked to the
   one before by its hash, each signature valid, no round drops a tenant or moves one back, every
   listed head still has a stored checkpoint, and every listed tenant still has a chain that
   reaches the listed number with the listed hash: a tenant deleted whole is named.
5. Runs: each run's events explain its stored state (``audit_check.check_trail``), and no event
   belongs to a run that no longer exists.

Only what was committed when the check started is judged: the rounds, then the checkpoints, then
the heads and the last ``seq`` are read first, and later events are left for the next check (a
round lists only heads committed before it, and a round's checkpoints commit with it).

The store-wide ``seq`` is only an order, never evidence: PostgreSQL sequences and InnoDB's
auto-increment skip values when a transaction rolls back, so gaps in ``seq`` appear on untouched
trails. What is numbered without gaps, and checked, is each tenant's ``chain_seq`` and the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from signoff.audit.checkpoints import all_checkpoints, signature_valid
from signoff.audit.keys import KeyRing
from signoff.audit.rounds_check import check_listed, read_rounds, rounds_newer_than_the_check
from signoff.audit_check import check_trail, runs_with_events, undecodable_rows
from signoff.core.chain import GENESIS, recomputed_hash
from signoff.core.ports import AuditEvent, ChainHead, Checkpoint, Store

PAGE = 500


@dataclass(frozen=True)
class Problem:
    """One finding. ``seq`` orders findings; the first one names the first bad event."""

    seq: int
    where: str
    problem: str
    code: str | None = None
    """The run check's stable code (``audit_check.AuditProblemCode``), for a run's finding."""

    def line(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass
class VerifyReport:
    events: int = 0
    pre_chain: int = 0
    runs: int = 0
    checkpoints: int = 0
    unverified_checkpoints: int = 0
    rounds: int = 0
    unverified_rounds: int = 0
    tenants: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def first(self) -> Problem | None:
        return min(self.problems, key=lambda p: p.seq) if self.problems else None


def _where(event: AuditEvent) -> str:
    number = f" #{event.chain_seq}" if event.chain_seq is not None else ""
    return (
        f"event seq {event.seq} (tenant {event.tenant_id!r}{number}, run {event.run_id}, "
        f"{event.kind})"
    )


@dataclass
class _Chain:
    chain_seq: int = 0
    hash: str = GENESIS
    last: AuditEvent | None = None


async def verify_trail(
    store: Store, keys: KeyRing | None = None, tenant_id: str | None = None
) -> VerifyReport:
    report = VerifyReport()

    def found(seq: int, where: str, problem: str) -> None:
        report.problems.append(Problem(seq, where, problem))

    rounds = await read_rounds(store, keys, tenant_id, found)
    report.rounds, report.unverified_rounds = rounds.count, rounds.unverified
    checkpoints = await all_checkpoints(store, tenant_id)
    newer = await rounds_newer_than_the_check(store, rounds, checkpoints)
    async with store.unit() as unit:
        heads = {head.tenant_id: head for head in await unit.audit.heads()}
        pre_chain_through = await unit.audit.pre_chain_through()
    watched = {(c.tenant_id, c.chain_seq) for c in checkpoints}
    watched.update((tenant, seq) for tenant, seq, _ in rounds.listed)
    seen: dict[tuple[str, int], AuditEvent] = {}
    chains: dict[str, _Chain] = {}
    run_ids: dict[str, int] = {}
    add = report.problems.append

    after = 0
    while True:
        async with store.unit() as unit:
            page = await unit.audit.scan(after_seq=after, limit=PAGE, tenant_id=tenant_id)
        for event in page:
            after = event.seq or after
            if not _check_link(event, chains, heads, pre_chain_through, report):
                continue  # committed after the check started
            report.events += 1
            run_ids.setdefault(event.run_id, after)
            key = (event.tenant_id, event.chain_seq or 0)
            if key in watched:
                seen[key] = event
        if len(page) < PAGE:
            break

    missing_heads = set(chains) - set(heads)
    if missing_heads:  # a tenant's first events may have committed after the heads were read
        async with store.unit() as unit:
            heads.update({h.tenant_id: h for h in await unit.audit.heads()})
    for tenant, chain in sorted(chains.items()):
        head = heads.get(tenant)
        if head is None:
            seq = (chain.last.seq or 0) if chain.last else 0
            add(Problem(seq, f"tenant {tenant!r}", "its chain head record is missing"))
        elif head.chain_seq > chain.chain_seq:
            add(_truncated(tenant, chain, head.chain_seq, "its head record says"))
    report.tenants = len(chains)
    _check_checkpoints(checkpoints, chains, seen, keys, report)
    reached = {t: (c.chain_seq, (c.last.seq or 0) if c.last else 0) for t, c in chains.items()}
    check_listed(rounds, checkpoints, newer, reached, heads, seen, found)
    await _check_runs(store, tenant_id, run_ids, report)
    report.problems.sort(key=lambda p: p.seq)
    return report


def _check_link(
    event: AuditEvent,
    chains: dict[str, _Chain],
    heads: dict[str, ChainHead],
    pre_chain_through: int,
    report: VerifyReport,
) -> bool:
    """Check one event against its chain so far; ``False``: it is newer than the check."""
    seq = event.seq or 0
    add = report.problems.append
    if event.chain_seq is None:
        if seq > pre_chain_through:
            add(Problem(seq, _where(event), "has no chain link: inserted outside the chain"))
        else:
            report.pre_chain += 1
        return True
    head = heads.get(event.tenant_id)
    if head is not None and event.chain_seq > head.chain_seq:
        return False
    chain = chains.setdefault(event.tenant_id, _Chain())
    expected = chain.chain_seq + 1
    if event.chain_seq > expected:
        missing = event.chain_seq - expected
        add(
            Problem(
                seq,
                _where(event),
                f"the chain jumps from #{chain.chain_seq} to #{event.chain_seq}: "
                f"{missing} event(s) before it were deleted",
            )
        )
    elif event.chain_seq < expected:
        add(
            Problem(
                seq,
                _where(event),
                f"#{event.chain_seq} comes after #{chain.chain_seq} in the log: "
                "events were reordered or inserted",
            )
        )
    elif event.prev_hash != chain.hash:
        add(
            Problem(
                seq,
                _where(event),
                f"does not link to #{chain.chain_seq} before it: an event was replaced, "
                "deleted or inserted there",
            )
        )
    if event.hash is None or recomputed_hash(event) != event.hash:
        add(Problem(seq, _where(event), "its content does not match its hash: it was edited"))
    # Go on from this event, so independent damage further on is reported too.
    chains[event.tenant_id] = _Chain(event.chain_seq, event.hash or "", event)
    return True


def _truncated(tenant: str, chain: _Chain, claimed: int, source: str) -> Problem:
    last = chain.last
    seq = (last.seq or 0) if last is not None else 0
    return Problem(
        seq,
        f"tenant {tenant!r}",
        f"the chain ends at #{chain.chain_seq} but {source} #{claimed}: "
        f"events #{chain.chain_seq + 1}..#{claimed} were deleted (truncated tail)",
    )


def _check_checkpoints(
    checkpoints: list[Checkpoint],
    chains: dict[str, _Chain],
    seen: dict[tuple[str, int], AuditEvent],
    keys: KeyRing | None,
    report: VerifyReport,
) -> None:
    add = report.problems.append
    for checkpoint in checkpoints:
        report.checkpoints += 1
        where = (
            f"checkpoint {checkpoint.id} (tenant {checkpoint.tenant_id!r} #{checkpoint.chain_seq})"
        )
        valid = signature_valid(checkpoint, keys) if keys is not None else None
        if valid is None:
            report.unverified_checkpoints += 1
            if keys is not None:
                add(Problem(0, where, f"signed by key {checkpoint.key_id!r}, not in the key ring"))
        elif not valid:
            add(Problem(0, where, "its signature does not verify: the checkpoint was altered"))
            continue
        chain = chains.get(checkpoint.tenant_id, _Chain())
        if checkpoint.chain_seq > chain.chain_seq:
            add(_truncated(checkpoint.tenant_id, chain, checkpoint.chain_seq, f"{where} signed"))
            continue
        signed = seen.get((checkpoint.tenant_id, checkpoint.chain_seq))
        if signed is None or signed.hash != checkpoint.head_hash:
            add(
                Problem(
                    (signed.seq or 0) if signed is not None else 0,
                    where,
                    f"event #{checkpoint.chain_seq} no longer has the signed hash: "
                    "the chain was rewritten up to there",
                )
            )


async def _check_runs(
    store: Store, tenant_id: str | None, run_ids: dict[str, int], report: VerifyReport
) -> None:
    found: set[str] = set()
    async for run, events in runs_with_events(store, tenant_id):
        report.runs += 1
        found.add(run.run_id)
        first = min((e.seq or 0 for e in events), default=0)
        for problem in check_trail(run, events):
            seq = problem.seq if problem.seq is not None else first
            report.problems.append(
                Problem(seq, f"run {problem.run_id}", problem.problem, str(problem.code))
            )
    faults = undecodable_rows(store)  # what the reads above had to skip
    unreadable = {row.row_id for row in faults} if faults is not None else set()
    for run_id, seq in run_ids.items():
        if run_id not in found and run_id not in unreadable:
            report.problems.append(
                Problem(seq, f"run {run_id}", "has audit events but the run itself was deleted")
            )
    for row in faults or ():
        where = f"run {row.row_id}" if row.table == "signoff_runs" else f"{row.table} {row.row_id}"
        report.problems.append(
            Problem(
                run_ids.get(row.row_id, 0),
                where,
                f"its {row.table} row cannot be decoded and was skipped ({row.error})",
            )
        )
