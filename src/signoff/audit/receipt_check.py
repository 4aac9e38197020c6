"""``signoff audit verify-receipt``: a receipt checked with no database (``docs/receipts.md``).

In this order, stopping at the first problem (its stable ``ReceiptProblemCode``):

1. the document is a ``signoff.receipt.v1`` receipt with every field of the right type;
2. its chain opens with the run's ``proposed`` event and ends at the checkpoint; every link's
   ``from`` follows the one before, its ``prev_hash`` is the hash of the one before, each event
   names the receipt's run, and each event's hash is the SHA-256 of its RFC 8785 body;
3. the last link's hash is the checkpoint's signed head hash, and the checkpoint's signature
   verifies; so does the attestation over every link (which vouches for the elided hashes);
4. the substance digests listed are those the events chain, and every value shown whole has
   its digest; every decision has its digest, and the decisions are exactly those the events
   chain;
5. the approval that released the run approved what was dispatched (its digest is the
   dispatch event's ``executed_digest``), and — with the approved input shown whole — that
   digest is the approval digest of the action, revision, input, resource, principal and tenant.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from signoff.audit.receipt_shape import (
    CHECKPOINT_FIELDS,
    EVENT_FIELDS,
    PARTS,
    ReceiptProblem,
    ReceiptProblemCode,
    SignatureCheck,
    either,
    malformed,
    public_keys_check,
    ring_check,
    shape,
)
from signoff.core import substance
from signoff.core.approval_digest import approval_digest
from signoff.core.chain import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_FORMAT_V2,
    EVENT_FORMAT,
    canonical_json,
    receipt_message,
    sha256_hex,
    timestamp,
)

__all__ = [
    "ReceiptProblem",
    "ReceiptProblemCode",
    "ReceiptSummary",
    "SignatureCheck",
    "digest",
    "either",
    "public_keys_check",
    "ring_check",
    "verify_receipt",
]

_DECIDING = frozenset(
    {
        "approval_recorded",
        "approval_rejected",
        "approved_dispatching",
        "approved_awaiting_dispatch",
        "resume_refused",
        "limit_exceeded",
    }
)


@dataclass(frozen=True)
class ReceiptSummary:
    run_id: str
    tenant_id: str
    status: str
    events: int
    elided: int
    checkpoint_seq: int
    checkpoint_round: int | None
    checked_values: int
    masked_values: int
    decisions: int

    def line(self) -> str:
        where = f" in round {self.checkpoint_round}" if self.checkpoint_round else ""
        return (
            f"receipt of run {self.run_id} holds: {self.status}, {self.events} events "
            f"({self.elided} of other runs elided) up to checkpoint #{self.checkpoint_seq} of "
            f"tenant {self.tenant_id!r}{where}; {self.decisions} decisions, "
            f"{self.checked_values} values checked against their digests, "
            f"{self.masked_values} masked"
        )


def digest(value: Any) -> str:
    """What ``core.substance.digest`` computes, from a value as a receipt holds it."""
    return sha256_hex(canonical_json(value))


def verify_receipt(document: Any, check: SignatureCheck) -> ReceiptSummary:
    """The receipt's summary when it holds; raises ``ReceiptProblem`` naming the first problem."""
    try:
        return _verified(document, check)
    except RecursionError:
        raise malformed("a value is nested too deeply") from None


def _verified(document: Any, check: SignatureCheck) -> ReceiptSummary:
    receipt = shape(document)
    chain = receipt["chain"]
    events = _check_chain(receipt, chain)
    checkpoint = _check_anchor(receipt, chain, check)
    checked, masked = _check_substance(receipt, events)
    _check_decisions(receipt, events)
    _check_release(receipt, events)
    return ReceiptSummary(
        run_id=receipt["run_id"],
        tenant_id=receipt["tenant_id"],
        status=receipt["status"],
        events=len(events),
        elided=sum(link["to"] - link["from"] + 1 for link in chain if link["type"] == "elided"),
        checkpoint_seq=checkpoint["chain_seq"],
        checkpoint_round=checkpoint.get("round"),
        checked_values=checked,
        masked_values=masked,
        decisions=len(receipt["decisions"]),
    )


# ---------------------------------------------------------------------------- 2. chain


def _check_chain(receipt: dict[str, Any], chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = chain[0]
    if first["type"] != "event" or first["kind"] != "proposed":
        raise ReceiptProblem(
            ReceiptProblemCode.INCOMPLETE, "the chain does not open with the run's proposal"
        )
    events: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    for link in chain:
        number = link["from"]
        if before is not None:
            if number != before["to"] + 1:
                raise ReceiptProblem(
                    ReceiptProblemCode.CHAIN_BROKEN,
                    f"#{number} follows #{before['to']}: a link was dropped or reordered",
                )
            if link["prev_hash"] != before["hash"]:
                raise ReceiptProblem(
                    ReceiptProblemCode.CHAIN_BROKEN,
                    f"#{number} does not link to #{before['to']} before it",
                )
        if link["type"] == "event":
            _check_event(receipt, link)
            events.append(link)
        before = link
    return events


def _check_event(receipt: dict[str, Any], link: dict[str, Any]) -> None:
    number = link["from"]
    if link["run_id"] != receipt["run_id"]:
        raise ReceiptProblem(
            ReceiptProblemCode.FOREIGN_EVENT, f"event #{number} belongs to another run"
        )
    body = {
        "format": EVENT_FORMAT,
        "tenant_id": receipt["tenant_id"],
        "chain_seq": number,
        "prev_hash": link["prev_hash"],
        **{k: link[k] for k in EVENT_FIELDS},
    }
    try:
        recomputed = digest(body)
    except (ValueError, TypeError):  # rfc8785.CanonicalizationError is a ValueError
        recomputed = None
    if recomputed != link["hash"]:
        raise ReceiptProblem(
            ReceiptProblemCode.EVENT_EDITED,
            f"event #{number} ({link['kind']}): its content does not match its hash",
        )


# ---------------------------------------------------------------------------- 3. anchor


def _check_anchor(
    receipt: dict[str, Any], chain: list[dict[str, Any]], check: SignatureCheck
) -> dict[str, Any]:
    checkpoint: dict[str, Any] = receipt["checkpoint"]
    last = chain[-1]
    if checkpoint["tenant_id"] != receipt["tenant_id"] or (
        checkpoint["chain_seq"],
        checkpoint["head_hash"],
    ) != (last["to"], last["hash"]):
        raise ReceiptProblem(
            ReceiptProblemCode.CHECKPOINT_MISMATCH,
            f"the chain ends at #{last['to']}, not at the hash checkpoint "
            f"#{checkpoint['chain_seq']} signed",
        )
    body = {"format": CHECKPOINT_FORMAT, **{k: checkpoint[k] for k in CHECKPOINT_FIELDS}}
    if checkpoint.get("round") is not None:
        body |= {"format": CHECKPOINT_FORMAT_V2, "round": checkpoint["round"]}
    _signed("the checkpoint", checkpoint, canonical_json(body), check)
    attestation = receipt["attestation"]
    try:
        at = datetime.fromisoformat(attestation["at"].replace("Z", "+00:00"))
        canonical = at.tzinfo is not None and timestamp(at) == attestation["at"]
    except ValueError:
        canonical = False
    if not canonical:  # signed as written: YYYY-MM-DDTHH:MM:SS.ffffffZ
        raise malformed("attestation.at is not an instant as signoff writes one")
    message = receipt_message(
        receipt["tenant_id"],
        receipt["run_id"],
        chain,
        checkpoint["chain_seq"],
        checkpoint["head_hash"],
        at,
        attestation["key_id"],
        attestation["algorithm"],
    )
    _signed("the attestation", attestation, message, check)
    return checkpoint


def _signed(what: str, record: dict[str, Any], message: bytes, check: SignatureCheck) -> None:
    verdict = check(record["key_id"], record["algorithm"], message, record["signature"])
    if verdict is None:
        raise ReceiptProblem(
            ReceiptProblemCode.KEY_UNKNOWN,
            f"{what} is signed by key {record['key_id']!r} ({record['algorithm']}), "
            "and no key given verifies it",
        )
    if not verdict:
        raise ReceiptProblem(
            ReceiptProblemCode.SIGNATURE_INVALID, f"{what}'s signature does not verify"
        )


# ---------------------------------------------------------------------------- 4. substance


def _chained(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Each substance digest as the events chain it (the last event carrying it decides)."""
    opened = events[0]["data"] or {}
    found: dict[str, Any] = {
        "input": opened.get(substance.INPUT_DIGEST),
        "principal": opened.get(substance.PRINCIPAL_DIGEST),
    }
    for name, key in (
        ("approved_input", substance.APPROVED_INPUT_DIGEST),
        ("amendments", substance.AMENDMENTS_DIGEST),
        ("result", substance.RESULT_DIGEST),
        ("output", substance.OUTPUT_DIGEST),
    ):
        carrying = [e["data"] for e in events if isinstance(e["data"], dict) and key in e["data"]]
        found[name] = carrying[-1][key] if carrying else None
    return found


def _check_substance(receipt: dict[str, Any], events: list[dict[str, Any]]) -> tuple[int, int]:
    chained = _chained(events)
    checked = masked = 0
    for name in PARTS:
        part = receipt["substance"].get(name)
        listed = part.get("digest") if part is not None else None
        if listed != chained[name]:
            raise ReceiptProblem(
                ReceiptProblemCode.DIGEST_MISMATCH,
                f"the {name.replace('_', ' ')} digest listed is not the one the events chain",
            )
        if part is None:
            continue
        if "value" in part:
            try:
                holds = digest(part["value"]) == listed
            except (ValueError, TypeError):
                holds = False
            if not holds:
                raise ReceiptProblem(
                    ReceiptProblemCode.VALUE_MISMATCH,
                    f"the {name.replace('_', ' ')} shown is not the one its digest covers",
                )
            checked += 1
        elif "masked" in part:
            masked += 1
    return checked, masked


def _check_decisions(receipt: dict[str, Any], events: list[dict[str, Any]]) -> None:
    shown = []
    for n, entry in enumerate(receipt["decisions"]):
        try:
            holds = digest(entry["decision"]) == entry["digest"]
        except (ValueError, TypeError):
            holds = False
        if not holds:
            raise ReceiptProblem(
                ReceiptProblemCode.VALUE_MISMATCH,
                f"decision {n + 1} is not the one its digest covers",
            )
        shown.append(entry["digest"])
    chained = [
        e["data"][substance.DECISION_DIGEST]
        for e in events
        if e["kind"] in _DECIDING
        and isinstance(e["data"], dict)
        and substance.DECISION_DIGEST in e["data"]
    ]
    if Counter(shown) != Counter(chained):
        raise ReceiptProblem(
            ReceiptProblemCode.DIGEST_MISMATCH,
            "the decisions listed are not the decisions the events chain",
        )


# ---------------------------------------------------------------------------- 5. release


def _check_release(receipt: dict[str, Any], events: list[dict[str, Any]]) -> None:
    dispatched = [e for e in events if e["kind"] == "approved_dispatching"]
    if not dispatched:
        return
    data = dispatched[-1]["data"] or {}
    executed = data.get("executed_digest")
    releasing = data.get(substance.DECISION_DIGEST)
    decisions = {entry["digest"]: entry["decision"] for entry in receipt["decisions"]}
    decision = decisions.get(releasing) if isinstance(releasing, str) else None
    if decision is not None and decision.get("digest") != executed:
        raise ReceiptProblem(
            ReceiptProblemCode.APPROVAL_MISMATCH,
            "the approval that released the run did not approve the call dispatched",
        )
    will_run = receipt["substance"].get("approved_input") or receipt["substance"].get("input")
    principal = (receipt["substance"].get("principal") or {}).get("value")
    if not isinstance(will_run, dict) or "value" not in will_run or not isinstance(principal, dict):
        return
    try:
        recomputed = approval_digest(
            action_id=receipt["action_id"],
            definition_revision=str(data.get("revision")),
            input=will_run["value"],
            resource=receipt.get("resource"),
            principal_id=principal["id"],
            principal_roles=principal["roles"],
            tenant_id=receipt["tenant_id"],
        )
    except (KeyError, ValueError, TypeError):
        recomputed = None
    if recomputed != executed:
        raise ReceiptProblem(
            ReceiptProblemCode.APPROVAL_MISMATCH,
            "the call dispatched is not the approved input of this action, resource and principal",
        )
