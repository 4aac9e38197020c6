"""The audit hash chain: what an event's hash covers, and how events link (contract §10).

Every tenant has one chain. Event number ``n`` (``chain_seq``, from 1) carries ``prev_hash``, the
hash of event ``n - 1`` (64 zeros for the first), and ``hash``, the SHA-256 (hex) of the RFC 8785
canonical JSON of its *body*::

    {"format": "signoff.audit.v1", "tenant_id", "chain_seq", "prev_hash", "run_id", "kind",
     "at", "actor", "status", "code", "data"}

``at`` is written ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC, microseconds). ``data`` is stored as
JSON and hashed as stored; ``chain_safe`` makes it representable in RFC 8785 before it is stored
(integers beyond +-(2**53 - 1) and non-finite floats become strings), so what is hashed is
exactly what anybody reads back. ``docs/audit.md`` is the auditor's version of this page.

Stores call ``link`` under their own concurrency control (one chain head per tenant), so the
hashing rule lives here, once, and the stores only decide the order. So do the bytes a
checkpoint's signature covers (``checkpoint_message``) and a checkpoint round's
(``round_message``, whose SHA-256 is the round's hash: ``audit/checkpoints.py``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import rfc8785
from pydantic_core import to_jsonable_python

from signoff.core import jcs
from signoff.core.ports import AuditEvent, ChainHead

EVENT_FORMAT = "signoff.audit.v1"
GENESIS = "0" * 64
_SAFE_INT = 2**53 - 1


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JSON Canonicalization Scheme) bytes of a JSON value (``core/jcs.py``)."""
    return jcs.canonical_json(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def timestamp(at: datetime) -> str:
    """The one text form of an instant inside hashed and signed bodies."""
    last = _last_timestamp
    if last[0] is at:  # the events of one unit share their instant; the tuple keeps it alive
        return last[1]
    if at.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
    utc = at if at.tzinfo is UTC else at.astimezone(UTC)
    if utc.year < 1000:  # strftime's %Y does not pad; kept as it always wrote these
        text = utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    else:
        text = utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    _remember(at, text)
    return text


_last_timestamp: tuple[datetime | None, str] = (None, "")


def _remember(at: datetime, text: str) -> None:
    global _last_timestamp
    _last_timestamp = (at, text)


def chain_safe(value: Any) -> Any:
    """``value`` (plain JSON) with what RFC 8785 cannot express turned into strings."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INT <= value <= _SAFE_INT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): chain_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [chain_safe(v) for v in value]
    if isinstance(value, datetime) and value.tzinfo is not None:
        return timestamp(value)
    # Anything else (a model, an enum, a date): its JSON form, as the stores always wrote it.
    return chain_safe(to_jsonable_python(value, serialize_unknown=True))


def event_content(event: AuditEvent) -> dict[str, Any]:
    """What an event says, as JSON: the one serialisation the hash and the export share."""
    return _content(event, event.data)


def _content(event: AuditEvent, data: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "run_id": event.run_id,
        "kind": event.kind,
        "at": timestamp(event.at),
        "actor": event.actor,
        "status": event.status,
        "code": event.code,
        "data": data,
    }


def event_body(event: AuditEvent, chain_seq: int, prev_hash: str) -> dict[str, Any]:
    return _body(event, event.data, chain_seq, prev_hash)


def _body(
    event: AuditEvent, data: dict[str, Any] | None, chain_seq: int, prev_hash: str
) -> dict[str, Any]:
    return {
        "format": EVENT_FORMAT,
        "tenant_id": event.tenant_id,
        "chain_seq": chain_seq,
        "prev_hash": prev_hash,
        **_content(event, data),
    }


def event_hash(event: AuditEvent, chain_seq: int, prev_hash: str) -> str:
    return sha256_hex(canonical_json(event_body(event, chain_seq, prev_hash)))


def recomputed_hash(event: AuditEvent) -> str | None:
    """The hash ``event`` should carry, from its stored content; ``None`` if it is not chained
    or its content cannot be canonicalised (which is itself a sign of tampering)."""
    if event.chain_seq is None or event.prev_hash is None:
        return None
    try:
        return event_hash(event, event.chain_seq, event.prev_hash)
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        return None


def link(
    head: ChainHead, events: Sequence[AuditEvent], first_seq: int | None = None
) -> list[AuditEvent]:
    """``events`` (all of ``head``'s tenant) numbered and hashed after ``head``, in order.

    ``data`` is replaced by its ``chain_safe`` form, which is what the store must keep. With
    ``first_seq``, the events also carry their store-wide ``seq`` from it on (one object each).
    """
    linked: list[AuditEvent] = []
    seq, prev = head.chain_seq, head.hash
    for n, event in enumerate(events):
        if event.tenant_id != head.tenant_id:
            raise ValueError("link: every event must belong to the head's tenant")
        seq += 1
        data = chain_safe(event.data) if event.data is not None else None
        digest = sha256_hex(canonical_json(_body(event, data, seq, prev)))
        linked.append(
            AuditEvent(
                run_id=event.run_id,
                tenant_id=event.tenant_id,
                kind=event.kind,
                at=event.at,
                actor=event.actor,
                status=event.status,
                code=event.code,
                data=data,
                seq=event.seq if first_seq is None else first_seq + n,
                chain_seq=seq,
                prev_hash=prev,
                hash=digest,
            )
        )
        prev = digest
    return linked


def head_after(head: ChainHead, linked: Sequence[AuditEvent]) -> ChainHead:
    """The tenant's head once ``linked`` (``link``'s answer for ``head``) is appended."""
    if not linked:
        return head
    last = linked[-1]
    assert last.chain_seq is not None and last.hash is not None, "not linked"
    return ChainHead(head.tenant_id, last.chain_seq, last.hash)


def by_tenant(events: Sequence[AuditEvent]) -> list[tuple[str, list[AuditEvent]]]:
    """Events grouped per tenant (order kept inside each), tenants sorted: a fixed lock order."""
    groups: dict[str, list[AuditEvent]] = {}
    for event in events:
        groups.setdefault(event.tenant_id, []).append(event)
    return sorted(groups.items())


CHECKPOINT_FORMAT = "signoff.checkpoint.v1"
CHECKPOINT_FORMAT_V2 = "signoff.checkpoint.v2"
ROUND_FORMAT = "signoff.round.v1"


def checkpoint_message(
    tenant_id: str,
    chain_seq: int,
    head_hash: str,
    at: datetime,
    key_id: str,
    algorithm: str,
    round: int | None = None,
) -> bytes:
    """The bytes a checkpoint's signature covers (RFC 8785 canonical JSON).

    A checkpoint signed in a round (``round``, from 1) is ``signoff.checkpoint.v2`` and names
    its round; one signed before rounds existed (``None``) is ``signoff.checkpoint.v1``.
    """
    body: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT if round is None else CHECKPOINT_FORMAT_V2,
        "tenant_id": tenant_id,
        "chain_seq": chain_seq,
        "head_hash": head_hash,
        "at": timestamp(at),
        "key_id": key_id,
        "algorithm": algorithm,
    }
    if round is not None:
        body["round"] = round
    return canonical_json(body)


def round_heads(heads: Sequence[ChainHead]) -> dict[str, dict[str, Any]]:
    """A round's listing as JSON: ``{tenant: {"chain_seq", "head_hash"}}`` (what is stored)."""
    return {h.tenant_id: {"chain_seq": h.chain_seq, "head_hash": h.hash} for h in heads}


def round_message(
    round: int,
    prev_hash: str,
    heads: Sequence[ChainHead],
    at: datetime,
    key_id: str,
    algorithm: str,
) -> bytes:
    """The bytes a round's signature covers; their SHA-256 is the round's hash, which the next
    round names as ``prev_hash`` (64 zeros for round 1), so the rounds form one chain."""
    return canonical_json(
        {
            "format": ROUND_FORMAT,
            "round": round,
            "prev_hash": prev_hash,
            "heads": round_heads(heads),
            "at": timestamp(at),
            "key_id": key_id,
            "algorithm": algorithm,
        }
    )


RECEIPT_FORMAT = "signoff.receipt.v1"


def receipt_message(
    tenant_id: str,
    run_id: str,
    links: Sequence[Mapping[str, Any]],
    checkpoint_seq: int,
    head_hash: str,
    at: datetime,
    key_id: str,
    algorithm: str,
) -> bytes:
    """The bytes a receipt's attestation covers (``audit/receipt.py``): the links of a run's
    stretch of its tenant's chain — each ``{"from", "to", "prev_hash", "hash"}``, one per event
    of the run and one per stretch of other runs' events between them — up to the checkpoint at
    ``checkpoint_seq`` with hash ``head_hash``. It vouches for the hashes of the events it does
    not show, which a verifier cannot recompute without their (other runs') content."""
    return canonical_json(
        {
            "format": RECEIPT_FORMAT,
            "tenant_id": tenant_id,
            "run_id": run_id,
            "links": [{k: link[k] for k in ("from", "to", "prev_hash", "hash")} for link in links],
            "checkpoint": {"chain_seq": checkpoint_seq, "head_hash": head_hash},
            "at": timestamp(at),
            "key_id": key_id,
            "algorithm": algorithm,
        }
    )
