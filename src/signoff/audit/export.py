"""``signoff audit export``: events with their hashes, then checkpoints, then rounds, as JSON lines.

Events come in ``seq`` order, so an export can resume after the last ``seq`` it wrote
(``--after-seq``). Each line is one of::

    {"type": "event", "seq", "tenant_id", "chain_seq", "prev_hash", "hash", "pre_chain",
     "run_id", "kind", "at", "actor", "status", "code", "data"}
    {"type": "checkpoint", "id", "tenant_id", "chain_seq", "head_hash", "at", "key_id",
     "algorithm", "signature", "round"}
    {"type": "round", "round", "prev_hash", "hash", "heads", "at", "key_id", "algorithm",
     "signature"}

Rounds come in number order and list every tenant, so a ``--tenant`` export leaves them out.

``at`` is written exactly as it is hashed (``core/chain.timestamp``), so a line is verifiable
as it stands (``docs/audit.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from signoff.audit.checkpoints import all_checkpoints
from signoff.core.chain import event_content, round_heads, timestamp
from signoff.core.ports import AuditEvent, Checkpoint, CheckpointRound, Store

PAGE = 500
ROUND_PAGE = 50


def event_line(event: AuditEvent) -> dict[str, Any]:
    return {
        "type": "event",
        "seq": event.seq,
        "tenant_id": event.tenant_id,
        "chain_seq": event.chain_seq,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
        "pre_chain": event.chain_seq is None,
        **event_content(event),
    }


def checkpoint_line(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "type": "checkpoint",
        "id": checkpoint.id,
        "tenant_id": checkpoint.tenant_id,
        "chain_seq": checkpoint.chain_seq,
        "head_hash": checkpoint.head_hash,
        "at": timestamp(checkpoint.at),
        "key_id": checkpoint.key_id,
        "algorithm": checkpoint.algorithm,
        "signature": checkpoint.signature,
        "round": checkpoint.round,
    }


def round_line(checkpoint_round: CheckpointRound) -> dict[str, Any]:
    return {
        "type": "round",
        "round": checkpoint_round.round,
        "prev_hash": checkpoint_round.prev_hash,
        "hash": checkpoint_round.hash,
        "heads": round_heads(checkpoint_round.heads),
        "at": timestamp(checkpoint_round.at),
        "key_id": checkpoint_round.key_id,
        "algorithm": checkpoint_round.algorithm,
        "signature": checkpoint_round.signature,
    }


async def export_lines(
    store: Store,
    *,
    tenant_id: str | None = None,
    after_seq: int = 0,
    since: datetime | None = None,
    until: datetime | None = None,
    checkpoints: bool = True,
) -> AsyncIterator[dict[str, Any]]:
    """Every matching event (``since <= at < until``), page by page, then the checkpoints, then
    (without ``tenant_id``) the rounds."""
    after = after_seq
    while True:
        async with store.unit() as unit:
            page = await unit.audit.scan(after_seq=after, limit=PAGE, tenant_id=tenant_id)
        for event in page:
            after = event.seq or after
            if (since is None or event.at >= since) and (until is None or event.at < until):
                yield event_line(event)
        if len(page) < PAGE:
            break
    if checkpoints:
        for checkpoint in await all_checkpoints(store, tenant_id):
            if (since is None or checkpoint.at >= since) and (
                until is None or checkpoint.at < until
            ):
                yield checkpoint_line(checkpoint)
    if checkpoints and tenant_id is None:
        after_round = 0
        while True:
            async with store.unit() as unit:
                rounds = await unit.audit.rounds(after_round=after_round, limit=ROUND_PAGE)
            for checkpoint_round in rounds:
                after_round = checkpoint_round.round
                if (since is None or checkpoint_round.at >= since) and (
                    until is None or checkpoint_round.at < until
                ):
                    yield round_line(checkpoint_round)
            if len(rounds) < ROUND_PAGE:
                break
