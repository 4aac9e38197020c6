"""What a receipt must look like before it is checked, the problems a check names, and where
signatures are checked (a key ring, or Ed25519 public keys given without ids):
``audit/receipt_check.py`` uses them."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from signoff.audit.keys import ED25519, KeyRing
from signoff.core.chain import RECEIPT_FORMAT

# Check a signature: (key id, algorithm, message, base64 signature) -> valid, or None when no
# key for it was given.
SignatureCheck = Callable[[str, str, bytes, str], bool | None]

EVENT_FIELDS = ("run_id", "kind", "at", "actor", "status", "code", "data")
CHECKPOINT_FIELDS = ("tenant_id", "chain_seq", "head_hash", "at", "key_id", "algorithm")
PARTS = ("input", "principal", "approved_input", "amendments", "result", "output")


class ReceiptProblemCode(StrEnum):
    """What is wrong with a receipt (stable across wording changes)."""

    MALFORMED = "RECEIPT_MALFORMED"
    INCOMPLETE = "RECEIPT_INCOMPLETE"
    CHAIN_BROKEN = "RECEIPT_CHAIN_BROKEN"
    EVENT_EDITED = "RECEIPT_EVENT_EDITED"
    FOREIGN_EVENT = "RECEIPT_FOREIGN_EVENT"
    CHECKPOINT_MISMATCH = "RECEIPT_CHECKPOINT_MISMATCH"
    KEY_UNKNOWN = "RECEIPT_KEY_UNKNOWN"
    SIGNATURE_INVALID = "RECEIPT_SIGNATURE_INVALID"
    DIGEST_MISMATCH = "RECEIPT_DIGEST_MISMATCH"
    VALUE_MISMATCH = "RECEIPT_VALUE_MISMATCH"
    APPROVAL_MISMATCH = "RECEIPT_APPROVAL_MISMATCH"


class ReceiptProblem(Exception):
    def __init__(self, code: ReceiptProblemCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def ring_check(ring: KeyRing) -> SignatureCheck:
    def check(key_id: str, algorithm: str, message: bytes, signature: str) -> bool | None:
        key = ring.keys.get(key_id)
        if key is None or key.algorithm != algorithm:
            return None
        return key.verify(message, signature)

    return check


def public_keys_check(keys: Sequence[Ed25519PublicKey]) -> SignatureCheck:
    """Ed25519 public keys given without ids: a signature holds when one of them verifies it."""

    def check(_key_id: str, algorithm: str, message: bytes, signature: str) -> bool | None:
        if algorithm != ED25519 or not keys:
            return None
        try:
            raw = base64.b64decode(signature, validate=True)
        except (binascii.Error, ValueError):
            return False
        for key in keys:
            try:
                key.verify(raw, message)
            except InvalidSignature:
                continue
            return True
        return False

    return check


def either(*checks: SignatureCheck) -> SignatureCheck:
    def check(key_id: str, algorithm: str, message: bytes, signature: str) -> bool | None:
        verdicts = [c(key_id, algorithm, message, signature) for c in checks]
        if any(v is True for v in verdicts):
            return True
        return False if any(v is False for v in verdicts) else None

    return check


def malformed(what: str) -> ReceiptProblem:
    return ReceiptProblem(ReceiptProblemCode.MALFORMED, f"not a receipt: {what}")


def need(mapping: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = mapping.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise malformed(f"{where}.{key} is missing or of the wrong type")
    return value


def shape(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise malformed("expected a JSON object")
    if document.get("format") != RECEIPT_FORMAT:
        raise malformed(f"format is not {RECEIPT_FORMAT!r}")
    for key in ("run_id", "tenant_id", "action_id", "status"):
        need(document, key, str, "receipt")
    chain = need(document, "chain", list, "receipt")
    if not chain:
        raise malformed("receipt.chain is empty")
    for n, link in enumerate(chain):
        _link_shape(link, f"chain[{n}]")
    checkpoint = need(document, "checkpoint", dict, "receipt")
    for key in (*CHECKPOINT_FIELDS, "signature"):
        need(checkpoint, key, int if key == "chain_seq" else str, "checkpoint")
    if checkpoint.get("round") is not None:
        need(checkpoint, "round", int, "checkpoint")
    attestation = need(document, "attestation", dict, "receipt")
    for key in ("at", "key_id", "algorithm", "signature"):
        need(attestation, key, str, "attestation")
    _evidence_shape(document)
    return document


def _link_shape(link: Any, where: str) -> None:
    if not isinstance(link, dict) or link.get("type") not in ("event", "elided"):
        raise malformed(f"{where} is not an event or elided link")
    for key in ("from", "to"):
        need(link, key, int, where)
    for key in ("prev_hash", "hash"):
        need(link, key, str, where)
    if link["type"] == "event":
        if link["from"] != link["to"] or any(k not in link for k in EVENT_FIELDS):
            raise malformed(f"{where} is not a whole event")
    elif link["from"] > link["to"]:
        raise malformed(f"{where} ends before it starts")


def _evidence_shape(document: dict[str, Any]) -> None:
    """The substance parts and the decisions with their digests."""
    parts = need(document, "substance", dict, "receipt")
    for name in PARTS:
        part = parts.get(name)
        if part is not None and not isinstance(part, dict):
            raise malformed(f"substance.{name} is not an object")
    for n, entry in enumerate(need(document, "decisions", list, "receipt")):
        if not isinstance(entry, dict) or not isinstance(entry.get("decision"), dict):
            raise malformed(f"decisions[{n}] is not a decision")
        need(entry, "digest", str, f"decisions[{n}]")
