"""``signoff audit receipt``: one run's evidence as one self-contained document (``docs/receipts.md``).

A receipt (``signoff.receipt.v1``) holds:

- ``chain``: the run's stretch of its tenant's hash chain, from the run's first event up to the
  first signed checkpoint at or after its last event. Each event of the run is there whole, with
  its ``chain_seq``, ``prev_hash`` and ``hash`` (anybody can recompute its hash); each stretch of
  other runs' events between them is one ``elided`` link — ``from``/``to`` numbers, the hash
  before it and the hash of its last event — and nothing of their content;
- ``checkpoint``: that checkpoint, with its signature and key id;
- ``attestation``: a signature, by the key ring's signing key, over every link of ``chain`` up to
  the checkpoint (``core.chain.receipt_message``). An elided event's hash cannot be recomputed
  without the other run's content, so without it a forger could splice an invented event into
  the stretch; the attestation is made only after the whole stretch — every event, the other
  runs' too — was recomputed from the store and found to reach the checkpoint's signed hash;
- ``substance``: the digests the run's events chain (proposed input, principal, approved input,
  amendments, result, output) with each value where it may be shown: whole (``value``) when
  nothing in it is sensitive or the operator reveals it, masked (``masked``: the view every
  surface shows, not checkable against its digest) otherwise, or absent when the action's
  sensitive fields are not known here;
- ``decisions``: each decision as stored on the run, with its digest;
- ``resource`` and ``action_id``: with the approved input, what an approval digest is made of
  (the resource is in the chained events anyway: a reservation names its scope).

A receipt is made only for a finished run whose stored state agrees with its events
(``audit_check.check_trail``, the run half of ``signoff audit verify``): a run edited in the
store before its receipt was made is refused (``RECEIPT_RUN_INCONSISTENT``), never turned into
evidence. A run with no signed checkpoint after its last event yet is refused
(``RECEIPT_NOT_ANCHORED``; ``signoff audit receipt --checkpoint`` signs a round first).
``audit/receipt_check.py`` verifies a receipt with no database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from signoff.audit.checkpoints import all_checkpoints, signature_valid
from signoff.audit.export import checkpoint_line
from signoff.audit.keys import KeyRing
from signoff.audit_check import check_trail
from signoff.core import substance
from signoff.core.chain import (
    RECEIPT_FORMAT,
    chain_safe,
    event_content,
    receipt_message,
    recomputed_hash,
    timestamp,
)
from signoff.core.codes import Code
from signoff.core.definition import ActionDefinition
from signoff.core.ports import AuditEvent, Checkpoint, Store
from signoff.core.run import ActionRun
from signoff.core.visibility import masked_run

PAGE = 500


class ReceiptRefused(Exception):
    """No receipt for this run (yet); ``code`` says why."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Stretch:
    """The chain from the run's first event to the checkpoint, as the receipt lists it."""

    links: list[dict[str, Any]] = field(default_factory=list)
    reached: int = 0
    hash: str = ""


async def make_receipt(
    store: Store,
    run_id: str,
    keys: KeyRing | None,
    now: datetime,
    *,
    tenant_id: str | None = None,
    definition: ActionDefinition | None = None,
    reveal: bool = False,
) -> dict[str, Any]:
    """The receipt of ``run_id`` (in ``tenant_id``, when given), signed with ``keys``' signing
    key; raises ``ReceiptRefused``. Values are masked with ``definition``'s sensitive fields
    (withheld when it is ``None``) unless ``reveal``."""
    run, events = await _run_and_events(store, run_id, tenant_id)
    _check_run(run, events)
    if keys is None or keys.signing_key is None:
        raise ReceiptRefused(
            Code.RECEIPT_KEYS_MISSING,
            "a receipt is signed with the audit key ring's signing key; none is configured "
            "(SIGNOFF_AUDIT_KEYS or --keys)",
        )
    checkpoint = await _anchor(store, run, events, keys)
    stretch = await _stretch(store, run, events, checkpoint)
    signer = keys.signer
    message = receipt_message(
        run.tenant_id,
        run.run_id,
        stretch.links,
        checkpoint.chain_seq,
        checkpoint.head_hash,
        now,
        signer.id,
        signer.algorithm,
    )
    line = checkpoint_line(checkpoint)
    return {
        "format": RECEIPT_FORMAT,
        "run_id": run.run_id,
        "tenant_id": run.tenant_id,
        "action_id": run.action_id,
        "status": str(run.status),
        "code": run.result.code if run.result is not None else None,
        "resource": run.resource,
        "chain": stretch.links,
        "checkpoint": {k: v for k, v in line.items() if k not in ("type", "id")},
        "attestation": {
            "at": timestamp(now),
            "key_id": signer.id,
            "algorithm": signer.algorithm,
            "signature": signer.sign(message),
        },
        "substance": _substance(run, events, definition, reveal),
        "decisions": [
            {
                "decision": chain_safe(d.model_dump(mode="json")),
                "digest": substance.decision_digest(d),
            }
            for d in (run.approval.decisions if run.approval is not None else ())
        ],
        "revealed": reveal,
    }


async def _run_and_events(
    store: Store, run_id: str, tenant_id: str | None
) -> tuple[ActionRun, list[AuditEvent]]:
    async with store.unit() as unit:
        run = await unit.runs.get(run_id)
        events = await unit.audit.list_for_run(run_id) if run is not None else []
    if run is None or (tenant_id is not None and run.tenant_id != tenant_id):
        raise ReceiptRefused(Code.ACTION_RUN_NOT_FOUND, f"no run {run_id}")
    return run, events


def _check_run(run: ActionRun, events: list[AuditEvent]) -> None:
    if not run.is_terminal:
        raise ReceiptRefused(
            Code.RECEIPT_RUN_NOT_FINISHED,
            f"run {run.run_id} is {run.status}: a receipt is made once the run has finished",
        )
    opened = events[0].data if events else None
    if (
        any(e.chain_seq is None for e in events)
        or not opened
        or (substance.INPUT_DIGEST not in opened)
    ):
        raise ReceiptRefused(
            Code.RECEIPT_NOT_CHAINED,
            f"run {run.run_id} was recorded before its events chained its substance; "
            "signoff audit verify still checks it",
        )
    problems = check_trail(run, events)
    if problems:
        first = problems[0]
        raise ReceiptRefused(
            Code.RECEIPT_RUN_INCONSISTENT,
            f"run {run.run_id}: {first.problem} [{first.code}]; no receipt is made of a run "
            "its events do not explain (run signoff audit verify)",
        )


async def _anchor(
    store: Store, run: ActionRun, events: list[AuditEvent], keys: KeyRing
) -> Checkpoint:
    """The first checkpoint of the run's tenant at or after its last event, signature checked."""
    last = max(e.chain_seq or 0 for e in events)
    covering = [c for c in await all_checkpoints(store, run.tenant_id) if c.chain_seq >= last]
    if not covering:
        raise ReceiptRefused(
            Code.RECEIPT_NOT_ANCHORED,
            f"no signed checkpoint covers run {run.run_id} yet (its last event is "
            f"#{last} of tenant {run.tenant_id!r}): wait for the next one, or run "
            "signoff audit checkpoint",
        )
    checkpoint = min(covering, key=lambda c: (c.chain_seq, c.id or 0))
    valid = signature_valid(checkpoint, keys)
    if valid is None:
        raise ReceiptRefused(
            Code.RECEIPT_KEYS_MISSING,
            f"the checkpoint covering run {run.run_id} was signed by key "
            f"{checkpoint.key_id!r}, which the key ring does not hold",
        )
    if not valid:
        raise ReceiptRefused(
            Code.RECEIPT_TRAIL_INCONSISTENT,
            f"the checkpoint covering run {run.run_id} does not verify: run signoff audit verify",
        )
    return checkpoint


async def _stretch(
    store: Store, run: ActionRun, events: list[AuditEvent], checkpoint: Checkpoint
) -> _Stretch:
    """Every event of the tenant's chain from the run's first to the checkpoint, recomputed."""
    first = events[0]
    start = first.chain_seq or 0
    stretch = _Stretch(reached=start - 1, hash=first.prev_hash or "")
    after = (first.seq or 1) - 1
    while stretch.reached < checkpoint.chain_seq:
        async with store.unit() as unit:
            page = await unit.audit.scan(after_seq=after, limit=PAGE, tenant_id=run.tenant_id)
        for event in page:
            after = event.seq or after
            if stretch.reached < checkpoint.chain_seq:
                _take(stretch, event, run.run_id, _broken(run))
        if len(page) < PAGE:
            break
    if stretch.reached != checkpoint.chain_seq or stretch.hash != checkpoint.head_hash:
        _broken(run)(f"the chain does not reach the hash checkpoint {checkpoint.id} signed")
    return stretch


def _broken(run: ActionRun) -> Callable[[str], None]:
    def refuse(problem: str) -> None:
        raise ReceiptRefused(
            Code.RECEIPT_TRAIL_INCONSISTENT,
            f"tenant {run.tenant_id!r}: {problem}; no receipt is made on a chain that does not "
            "verify (run signoff audit verify)",
        )

    return refuse


def _take(stretch: _Stretch, event: AuditEvent, run_id: str, refuse: Callable[[str], None]) -> None:
    number = stretch.reached + 1
    if event.chain_seq != number or event.prev_hash != stretch.hash:
        refuse(f"event #{number} is missing, out of order or does not link")
    if event.hash is None or recomputed_hash(event) != event.hash:
        refuse(f"event #{number}'s content does not match its hash")
    assert event.hash is not None and event.prev_hash is not None
    links = stretch.links
    if event.run_id == run_id:
        links.append(
            {
                "type": "event",
                "from": number,
                "to": number,
                "prev_hash": event.prev_hash,
                "hash": event.hash,
                **event_content(event),
            }
        )
    elif links and links[-1]["type"] == "elided":
        links[-1].update(to=number, hash=event.hash)
    else:
        links.append(
            {
                "type": "elided",
                "from": number,
                "to": number,
                "prev_hash": event.prev_hash,
                "hash": event.hash,
            }
        )
    stretch.reached, stretch.hash = number, event.hash


# ---------------------------------------------------------------------------- substance


def _substance(
    run: ActionRun,
    events: list[AuditEvent],
    definition: ActionDefinition | None,
    reveal: bool,
) -> dict[str, Any]:
    """Each digest the events chain, with its value where the operator lets it be shown."""
    opened = events[0].data or {}
    amended = _last_with(events, substance.AMENDMENTS_DIGEST)
    ended = _last_with(events, substance.RESULT_DIGEST)
    shown = run if reveal else masked_run(run, definition) if definition is not None else None

    def part(digest: object, real: Any, seen: Callable[[ActionRun], Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"digest": digest}
        if shown is not None:
            view = chain_safe(seen(shown))
            entry["value" if view == chain_safe(real) else "masked"] = view
        return entry

    result = run.result
    found: dict[str, Any] = {
        "input": part(opened.get(substance.INPUT_DIGEST), run.input, lambda r: r.input),
        "principal": {
            "digest": opened.get(substance.PRINCIPAL_DIGEST),
            "value": {
                "id": run.principal.id,
                "roles": sorted(run.principal.roles),
                "tenant_id": run.tenant_id,
            },
        },
        "approved_input": None,
        "amendments": None,
        "result": None,
        "output": None,
    }
    if amended is not None:
        found["approved_input"] = part(
            amended[substance.APPROVED_INPUT_DIGEST], substance.will_run(run), substance.will_run
        )
        found["amendments"] = part(
            amended[substance.AMENDMENTS_DIGEST], _amendments(run), _amendments
        )
    if ended is not None and result is not None:
        found["result"] = part(ended[substance.RESULT_DIGEST], _result(run), _result)
        found["output"] = part(ended[substance.OUTPUT_DIGEST], result.output, _output)
    return found


def _last_with(events: list[AuditEvent], key: str) -> dict[str, Any] | None:
    carrying = [e.data for e in events if e.data and key in e.data]
    return carrying[-1] if carrying else None


def _amendments(run: ActionRun) -> list[dict[str, Any]]:
    return [a.model_dump(mode="json") for a in run.amendments]


def _result(run: ActionRun) -> dict[str, Any] | None:
    return run.result.model_dump(mode="json") if run.result is not None else None


def _output(run: ActionRun) -> Any:
    return run.result.output if run.result is not None else None
