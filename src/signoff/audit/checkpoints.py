"""Signed checkpoints of the chain heads, in rounds: ``signoff audit checkpoint`` and housekeeping.

A checkpoint says "tenant T's chain had head hash H at number N", signed by the key ring's
signing key. Deleting the tail of a chain (and fixing up its head row) is then detectable: the
chain no longer reaches N, or its event N no longer has hash H. A tenant whose head has not moved
since its last checkpoint gets no new one.

Each checkpoint run is one **round**, numbered 1, 2, 3 ... store-wide and written in one unit of
work: a checkpoint (``signoff.checkpoint.v2``, naming the round) for each tenant whose head moved,
and the round itself (``signoff.round.v1``), which signs every tenant's latest checkpointed head
as of that round, moved or not, and the previous round's hash. Nothing ties tenants' chains
together, so without rounds a tenant deleted whole (events, head, checkpoints) would leave no
trace; with them, the rounds after its last checkpoint still list it.

A round's listing starts from the previous round's (never from the checkpoints table, which an
intruder could have thinned out), so a round never drops a tenant or moves one back, and no
round is signed on top of one whose hash or signature fails (``RoundRefused``); the first
round lists the latest checkpoint of each tenant signed before rounds existed. No head moved and
nothing new to list: no round. Two instances checkpointing at once compute the same number; the
round's unique key lets one store it, and the other's unit rolls back (``RoundOutcome.lost``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from signoff.audit.keys import KeyRing
from signoff.core.chain import GENESIS, checkpoint_message, round_message, sha256_hex
from signoff.core.ports import ChainHead, Checkpoint, CheckpointRound, Store

_PAGE = 500


@dataclass(frozen=True)
class RoundOutcome:
    """What one checkpoint run did: ``round`` written with ``checkpoints``, nothing to sign
    (``round`` None), or ``lost``: another instance wrote round ``lost`` first."""

    round: int | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)
    lost: int | None = None


class _RoundTaken(Exception):
    """Rolls the losing unit back."""


class RoundRefused(Exception):
    """The latest round does not verify: a new round would sign on top of tampered state."""

    code = "AUDIT_INCONSISTENT"


def sign_head(head: ChainHead, keys: KeyRing, now: datetime, round: int) -> Checkpoint:
    signer = keys.signer
    message = checkpoint_message(
        head.tenant_id, head.chain_seq, head.hash, now, signer.id, signer.algorithm, round
    )
    return Checkpoint(
        tenant_id=head.tenant_id,
        chain_seq=head.chain_seq,
        head_hash=head.hash,
        at=now,
        key_id=signer.id,
        algorithm=signer.algorithm,
        signature=signer.sign(message),
        round=round,
    )


def sign_round(
    number: int, prev_hash: str, heads: list[ChainHead], keys: KeyRing, now: datetime
) -> CheckpointRound:
    signer = keys.signer
    listing = tuple(sorted(heads, key=lambda h: h.tenant_id))
    message = round_message(number, prev_hash, listing, now, signer.id, signer.algorithm)
    return CheckpointRound(
        round=number,
        prev_hash=prev_hash,
        heads=listing,
        at=now,
        key_id=signer.id,
        algorithm=signer.algorithm,
        signature=signer.sign(message),
        hash=sha256_hex(message),
    )


def round_hash(checkpoint_round: CheckpointRound) -> str:
    """The hash of what ``checkpoint_round`` says, recomputed from its stored content."""
    return sha256_hex(_round_message(checkpoint_round))


def _round_message(checkpoint_round: CheckpointRound) -> bytes:
    return round_message(
        checkpoint_round.round,
        checkpoint_round.prev_hash,
        checkpoint_round.heads,
        checkpoint_round.at,
        checkpoint_round.key_id,
        checkpoint_round.algorithm,
    )


def signature_valid(checkpoint: Checkpoint, keys: KeyRing) -> bool | None:
    """``None`` when the key ring does not hold the checkpoint's key (cannot tell)."""
    key = keys.keys.get(checkpoint.key_id)
    if key is None or key.algorithm != checkpoint.algorithm:
        return None
    message = checkpoint_message(
        checkpoint.tenant_id,
        checkpoint.chain_seq,
        checkpoint.head_hash,
        checkpoint.at,
        checkpoint.key_id,
        checkpoint.algorithm,
        checkpoint.round,
    )
    return key.verify(message, checkpoint.signature)


def round_signature_valid(checkpoint_round: CheckpointRound, keys: KeyRing) -> bool | None:
    """``None`` when the key ring does not hold the round's key (cannot tell)."""
    key = keys.keys.get(checkpoint_round.key_id)
    if key is None or key.algorithm != checkpoint_round.algorithm:
        return None
    return key.verify(_round_message(checkpoint_round), checkpoint_round.signature)


async def all_checkpoints(store: Store, tenant_id: str | None = None) -> list[Checkpoint]:
    found: list[Checkpoint] = []
    while True:
        after = (found[-1].id or 0) if found else 0
        async with store.unit() as unit:
            page = await unit.audit.checkpoints(tenant_id, after_id=after, limit=_PAGE)
        found.extend(page)
        if len(page) < _PAGE:
            return found


async def _listed_before_rounds(store: Store) -> dict[str, ChainHead]:
    """Each tenant's latest checkpoint from before rounds existed (what round 1 starts from)."""
    latest: dict[str, ChainHead] = {}
    for checkpoint in await all_checkpoints(store):
        known = latest.get(checkpoint.tenant_id)
        if known is None or checkpoint.chain_seq > known.chain_seq:
            latest[checkpoint.tenant_id] = ChainHead(
                checkpoint.tenant_id, checkpoint.chain_seq, checkpoint.head_hash
            )
    return latest


async def checkpoint_heads(
    store: Store, keys: KeyRing, now: datetime, tenant_id: str | None = None
) -> RoundOutcome:
    """One round: sign and store a checkpoint of every chain head that moved since it was last
    listed (only ``tenant_id``'s, if given), and the round listing every tenant's latest."""
    async with store.unit() as unit:
        latest = await unit.audit.latest_round()
        heads = await unit.audit.heads()
    if latest is None:
        listed = await _listed_before_rounds(store)
        number, prev_hash = 1, GENESIS
    else:
        if round_hash(latest) != latest.hash or round_signature_valid(latest, keys) is False:
            raise RoundRefused(
                f"round {latest.round} does not verify (its content or signature was altered): "
                "no round is signed on top of it; run signoff audit verify"
            )
        listed = {head.tenant_id: head for head in latest.heads}
        number, prev_hash = latest.round + 1, latest.hash
    moved = [
        head
        for head in heads
        if (tenant_id is None or head.tenant_id == tenant_id)
        and head.chain_seq > (listed[head.tenant_id].chain_seq if head.tenant_id in listed else 0)
    ]
    if not moved and (latest is not None or not listed):
        return RoundOutcome()
    made = [sign_head(head, keys, now, number) for head in moved]
    listing = {**listed, **{head.tenant_id: head for head in moved}}
    signed = sign_round(number, prev_hash, list(listing.values()), keys, now)
    try:
        async with store.unit() as unit:
            if not await unit.audit.add_round(signed, made):
                raise _RoundTaken
    except _RoundTaken:
        return RoundOutcome(lost=number)
    return RoundOutcome(round=number, checkpoints=made)
