"""``signoff audit export``: events with their hashes, then checkpoints, as JSON lines.

Events come in ``seq`` order, so an export can resume after the last ``seq`` it wrote
(``--after-seq``). Each line is one of::

    {"type": "event", "seq", "tenant_id", "chain_seq", "prev_hash", "hash", "pre_chain",
     "run_id", "kind", "at", "actor", "status", "code", "data"}
    {"type": "checkpoint", "id", "tenant_id", "chain_seq", "head_hash", "at", "key_id",
     "algorithm", "signature"}

``at`` is written exactly as it is hashed (``core/chain.timestamp``), so a line is verifiable
as it stands (``docs/audit.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from signoff.audit.checkpoints import all_checkpoints
from signoff.core.chain import event_content, timestamp
from signoff.core.ports import AuditEvent, Checkpoint, Store

PAGE = 500


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
    """Every matching event (``since <= at < until``), page by page, then the checkpoints."""
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
