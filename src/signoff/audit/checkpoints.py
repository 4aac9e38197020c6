"""Signed checkpoints of the chain heads: ``signoff audit checkpoint`` and housekeeping.

A checkpoint says "tenant T's chain had head hash H at number N", signed by the key ring's
signing key. Deleting the tail of a chain (and fixing up its head row) is then detectable: the
chain no longer reaches N, or its event N no longer has hash H. A tenant whose head has not moved
since its last checkpoint gets no new one.
"""

from __future__ import annotations

from datetime import datetime

from signoff.audit.keys import KeyRing
from signoff.core.chain import checkpoint_message
from signoff.core.ports import ChainHead, Checkpoint, Store

_PAGE = 500


def sign_head(head: ChainHead, keys: KeyRing, now: datetime) -> Checkpoint:
    signer = keys.signer
    message = checkpoint_message(
        head.tenant_id, head.chain_seq, head.hash, now, signer.id, signer.algorithm
    )
    return Checkpoint(
        tenant_id=head.tenant_id,
        chain_seq=head.chain_seq,
        head_hash=head.hash,
        at=now,
        key_id=signer.id,
        algorithm=signer.algorithm,
        signature=signer.sign(message),
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
    )
    return key.verify(message, checkpoint.signature)


async def all_checkpoints(store: Store, tenant_id: str | None = None) -> list[Checkpoint]:
    found: list[Checkpoint] = []
    while True:
        after = (found[-1].id or 0) if found else 0
        async with store.unit() as unit:
            page = await unit.audit.checkpoints(tenant_id, after_id=after, limit=_PAGE)
        found.extend(page)
        if len(page) < _PAGE:
            return found


async def checkpoint_heads(
    store: Store, keys: KeyRing, now: datetime, tenant_id: str | None = None
) -> list[Checkpoint]:
    """Sign and store a checkpoint of every chain head that moved since its last checkpoint."""
    latest: dict[str, int] = {}
    for checkpoint in await all_checkpoints(store, tenant_id):
        latest[checkpoint.tenant_id] = max(
            latest.get(checkpoint.tenant_id, 0), checkpoint.chain_seq
        )
    async with store.unit() as unit:
        heads = await unit.audit.heads()
    made = [
        sign_head(head, keys, now)
        for head in heads
        if (tenant_id is None or head.tenant_id == tenant_id)
        and head.chain_seq > latest.get(head.tenant_id, 0)
    ]
    if made:
        async with store.unit() as unit:
            for checkpoint in made:
                await unit.audit.add_checkpoint(checkpoint)
    return made
