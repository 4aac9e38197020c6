"""The rounds half of ``signoff audit verify`` (``verify.py`` runs it with the chain checks).

A round (``audit/checkpoints.py``) lists every tenant's latest checkpointed head. Checked here:
rounds are numbered 1, 2, 3 ... without gaps, each links to the one before by its hash, each
hash matches its content and each signature verifies (with the key ring, when given); no round
drops a tenant the round before listed or moves one back; every listed head is a stored
checkpoint and still on its tenant's chain, so a tenant deleted whole (events, head, checkpoints,
runs) behind a round is named; every checkpoint that names a round is listed by that round.

The rounds are read before anything else; a round committed after that is the next check's.
Findings go to ``report(seq, where, problem)``; ``seq`` 0 sorts them before event findings.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field

from signoff.audit.checkpoints import round_hash, round_signature_valid
from signoff.audit.keys import KeyRing
from signoff.core.chain import GENESIS
from signoff.core.ports import AuditEvent, Checkpoint, CheckpointRound, Store

PAGE = 50  # a round lists every tenant: pages stay small
Report = Callable[[int, str, str], None]


@dataclass
class Rounds:
    """What the stored rounds say, as far as the checks after the chain scan need it."""

    count: int = 0
    unverified: int = 0  # signatures not checked: no key ring, or its key is not in it
    numbers: set[int] = field(default_factory=set)
    last: int = 0
    # (tenant, chain_seq, head_hash) -> the first round that listed it (checked tenants only)
    listed: dict[tuple[str, int, str], int] = field(default_factory=dict)
    # tenant -> (chain_seq, head_hash, round) as the latest round listing it says
    latest: dict[str, tuple[int, str, int]] = field(default_factory=dict)


async def read_rounds(
    store: Store, keys: KeyRing | None, tenant_id: str | None, report: Report
) -> Rounds:
    """Every round in number order, each checked against the one before it."""
    rounds = Rounds()
    previous: CheckpointRound | None = None
    while True:
        async with store.unit() as unit:
            page = await unit.audit.rounds(after_round=rounds.last, limit=PAGE)
        for current in page:
            _check_round(current, previous, keys, tenant_id, rounds, report)
            rounds.numbers.add(current.round)
            rounds.last = current.round
            for head in current.heads:
                if tenant_id is None or head.tenant_id == tenant_id:
                    key = (head.tenant_id, head.chain_seq, head.hash)
                    rounds.listed.setdefault(key, current.round)
                    rounds.latest[head.tenant_id] = (head.chain_seq, head.hash, current.round)
            previous = current
        if len(page) < PAGE:
            return rounds


def _check_round(
    current: CheckpointRound,
    previous: CheckpointRound | None,
    keys: KeyRing | None,
    tenant_id: str | None,
    rounds: Rounds,
    report: Report,
) -> None:
    rounds.count += 1
    where = f"round {current.round}"
    expected = (previous.round if previous is not None else 0) + 1
    if current.round > expected:
        gone = (
            f"round {expected} is"
            if current.round == expected + 1
            else f"rounds {expected}..{current.round - 1} are"
        )
        report(0, where, f"{gone} missing before it: deleted")
    elif current.prev_hash != (previous.hash if previous is not None else GENESIS):
        before = f"round {previous.round}" if previous is not None else "the start (64 zeros)"
        report(0, where, f"does not link to {before}: a round was replaced or rewritten")
    if round_hash(current) != current.hash:
        report(0, where, "its content does not match its hash: it was edited")
    valid = round_signature_valid(current, keys) if keys is not None else None
    if valid is None:
        rounds.unverified += 1
        if keys is not None:
            report(0, where, f"signed by key {current.key_id!r}, not in the key ring")
    elif not valid:
        report(0, where, "its signature does not verify: the round was altered")
    if previous is None:
        return
    now = {head.tenant_id: head for head in current.heads}
    for head in previous.heads:
        if tenant_id is not None and head.tenant_id != tenant_id:
            continue
        listed = now.get(head.tenant_id)
        was = f"#{head.chain_seq} in round {previous.round}"
        if listed is None:
            report(0, where, f"drops tenant {head.tenant_id!r}, listed at {was}")
        elif listed.chain_seq < head.chain_seq or (
            listed.chain_seq == head.chain_seq and listed.hash != head.hash
        ):
            report(
                0,
                where,
                f"lists tenant {head.tenant_id!r} at #{listed.chain_seq}, "
                f"which does not follow {was}",
            )


async def rounds_newer_than_the_check(
    store: Store, rounds: Rounds, checkpoints: list[Checkpoint]
) -> set[int]:
    """Rounds committed between reading the rounds and reading the checkpoints."""
    if not any(c.round is not None and c.round > rounds.last for c in checkpoints):
        return set()
    newer: set[int] = set()
    while True:
        async with store.unit() as unit:
            page = await unit.audit.rounds(after_round=max(newer, default=rounds.last))
        newer.update(r.round for r in page)
        if not page:
            return newer


def check_listed(
    rounds: Rounds,
    checkpoints: list[Checkpoint],
    newer: set[int],
    reached: Mapping[str, tuple[int, int]],
    heads: Container[str],
    seen: Mapping[tuple[str, int], AuditEvent],
    report: Report,
) -> None:
    """After the chain scan (``reached``: tenant -> its chain's last number and that event's
    ``seq``; ``seen``: the events at watched numbers): every listed tenant still reaches what
    the latest round listing it says, every listed head is a stored checkpoint, and every
    checkpoint of a round is listed by it."""
    gone: set[str] = set()
    for tenant, (number, digest, signed_in) in sorted(rounds.latest.items()):
        where = f"tenant {tenant!r}"
        if tenant not in reached and tenant not in heads:
            gone.add(tenant)
            report(
                0,
                where,
                f"signed at #{number} in round {signed_in} is missing: its events, chain head "
                "and checkpoints were deleted",
            )
            continue
        end, last_seq = reached.get(tenant, (0, 0))
        if number > end:
            report(
                last_seq,
                where,
                f"the chain ends at #{end} but round {signed_in} signed #{number}: "
                f"events #{end + 1}..#{number} were deleted (truncated tail)",
            )
            continue
        event = seen.get((tenant, number))
        if event is None or event.hash != digest:
            report(
                (event.seq or 0) if event is not None else 0,
                where,
                f"event #{number} no longer has the hash round {signed_in} signed: "
                "the chain was rewritten up to there",
            )
    stored = {(c.tenant_id, c.chain_seq, c.head_hash) for c in checkpoints}
    for key, signed_in in sorted(rounds.listed.items()):
        tenant, number, _ = key
        if tenant not in gone and key not in stored:
            report(
                0,
                f"round {signed_in}",
                f"lists tenant {tenant!r} at #{number}, but that checkpoint is not stored: "
                "it was deleted",
            )
    for checkpoint in checkpoints:
        if checkpoint.round is None or checkpoint.round in newer:
            continue
        where = (
            f"checkpoint {checkpoint.id} (tenant {checkpoint.tenant_id!r} #{checkpoint.chain_seq})"
        )
        key = (checkpoint.tenant_id, checkpoint.chain_seq, checkpoint.head_hash)
        if checkpoint.round not in rounds.numbers:
            report(0, where, f"names round {checkpoint.round}, which is missing: deleted")
        elif rounds.listed.get(key) != checkpoint.round:
            report(
                0,
                where,
                f"round {checkpoint.round} does not list it: the checkpoint or the round "
                "was altered",
            )
