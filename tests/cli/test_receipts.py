"""Receipts (docs/receipts.md): one run's evidence, made from a real store and checked with no
database; every edit of a receipt — an event, a digest, a value, a signature, a dropped or
reordered link, a widened elided stretch — fails with its code, and a run edited in the store
before its receipt was made gets no receipt."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from signoff import ApprovalSpec, ExecutionContext, ExecutionResult
from signoff.audit.checkpoints import checkpoint_heads
from signoff.audit.keys import KeyRing
from signoff.audit.receipt import ReceiptRefused, make_receipt
from signoff.audit.receipt_check import ReceiptProblem, ring_check, verify_receipt
from signoff.cli import app
from signoff.core.codes import Code
from signoff.core.registry import ActionRegistry
from signoff.core.repair import RepairRequest
from signoff.core.runtime import Runtime
from signoff.core.visibility import MASK
from signoff.store.factory import open_store
from tests.helpers import LEAD, LEAD2, NO_APPROVAL, Recorder, approve, definition, proposal, reject

runner = CliRunner()
AMEND = ApprovalSpec(
    when="input.amount > 1000.0", approver_roles=("billing-lead",), count=2, amend=("amount",)
)
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)


@dataclass
class Flaky:
    """Possibly applied on its first call, fine afterwards (a MANUAL_REVIEW run to repair)."""

    calls: int = 0

    def __call__(self, context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            return ExecutionResult.possibly_applied_failure("ERP_TIMEOUT", "no answer")
        return {"done": True}


def url(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


def registry() -> ActionRegistry:
    return ActionRegistry(
        [
            definition(Recorder(), approval=AMEND),
            definition(
                Flaky(),
                id="invoice.retry",
                approval=NO_APPROVAL.model_copy(update={"approver_roles": ("billing-lead",)}),
                executor_idempotent=True,
            ),
        ]
    )


async def _populate(db: Path) -> dict[str, str]:
    store = await open_store(url(db))
    try:
        runtime = Runtime(registry(), store)
        plain = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
        amended = await runtime.propose(proposal({"invoice_id": "INV-2", "amount": 5000}, key="k2"))
        other = await runtime.propose(
            proposal({"invoice_id": "INV-9", "amount": 9}, tenant="other")
        )
        filler = await runtime.propose(proposal({"invoice_id": "INV-3", "amount": 20}, key="k3"))
        await runtime.decide(
            amended.run_id, "acme", replace(approve(LEAD), amendments={"amount": 4000})
        )
        await runtime.decide(amended.run_id, "acme", approve(LEAD2))
        denied = await runtime.propose(proposal({"invoice_id": "INV-4", "amount": 6000}, key="k4"))
        await runtime.decide(denied.run_id, "acme", reject(LEAD))
        failed = await runtime.propose(
            proposal({"invoice_id": "INV-5", "amount": 5}, key="k5", action="invoice.retry")
        )
        repair = await runtime.redispatch(failed.run_id, "acme", RepairRequest(LEAD, "checked"))
        waiting = await runtime.propose(proposal({"invoice_id": "INV-6", "amount": 7000}, key="k6"))
        await runtime.drain()
        return {
            "plain": plain.run_id,
            "amended": amended.run_id,
            "other": other.run_id,
            "filler": filler.run_id,
            "denied": denied.run_id,
            "failed": failed.run_id,
            "repair": repair.run_id,
            "waiting": waiting.run_id,
        }
    finally:
        await store.close()


@dataclass
class Trail:
    db: Path
    runs: dict[str, str]
    ring: KeyRing
    ring_file: Path
    public_key: Path


def _keys(directory: Path) -> tuple[KeyRing, Path, Path]:
    made = runner.invoke(app, ["audit", "keygen", "k1", "--dir", str(directory)])
    assert made.exit_code == 0, made.output
    ring_file = directory / "ring.yaml"
    ring_file.write_text(f"signing_key: k1\nkeys:\n{made.stdout}")
    return KeyRing.load(ring_file), ring_file, directory / "k1.pub.pem"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Trail:
    """A trail with every kind of finished run, checkpointed once (the waiting run too)."""
    directory = tmp_path_factory.mktemp("receipts")
    db = directory / "signoff.db"
    runs = asyncio.run(_populate(db))
    ring, ring_file, public_key = _keys(directory)
    done = runner.invoke(
        app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring_file)]
    )
    assert done.exit_code == 0, done.output
    return Trail(db, runs, ring, ring_file, public_key)


@pytest.fixture
def trail(signed: Trail, tmp_path: Path) -> Trail:
    """A copy of the signed trail for one test to change."""
    db = tmp_path / "copy.db"
    shutil.copy(signed.db, db)
    return replace(signed, db=db)


def receipt_of(trail: Trail, name: str, **options: Any) -> dict[str, Any]:
    async def work() -> dict[str, Any]:
        store = await open_store(url(trail.db), upgrade=False)
        try:
            return await make_receipt(store, trail.runs[name], trail.ring, NOW, **options)
        finally:
            await store.close()

    return asyncio.run(work())


def refusal(trail: Trail, name: str, **options: Any) -> str:
    with pytest.raises(ReceiptRefused) as refused:
        receipt_of(trail, name, **options)
    return str(refused.value.code)


def problem(trail: Trail, document: dict[str, Any]) -> str:
    with pytest.raises(ReceiptProblem) as found:
        verify_receipt(document, ring_check(trail.ring))
    return str(found.value.code)


FINISHED = ["plain", "amended", "denied", "failed", "repair"]


@pytest.mark.parametrize("name", FINISHED)
def test_the_receipt_of_every_kind_of_finished_run_verifies(trail: Trail, name: str) -> None:
    for reveal in (False, True):
        document = receipt_of(trail, name, reveal=reveal)
        summary = verify_receipt(json.loads(json.dumps(document)), ring_check(trail.ring))
        assert summary.run_id == trail.runs[name]
        assert summary.events == sum(1 for link in document["chain"] if link["type"] == "event")


def test_an_amended_run_receipt_shows_the_approved_input_and_both_decisions(trail: Trail) -> None:
    document = receipt_of(trail, "amended", reveal=True)
    assert document["substance"]["input"]["value"]["amount"] == 5000
    assert document["substance"]["approved_input"]["value"]["amount"] == 4000
    assert [d["decision"]["approver_id"] for d in document["decisions"]] == [LEAD.id, LEAD2.id]
    summary = verify_receipt(document, ring_check(trail.ring))
    assert summary.checked_values == 6 and summary.decisions == 2


def test_nothing_of_other_runs_is_in_a_receipt_but_the_chain_still_reaches_the_checkpoint(
    trail: Trail,
) -> None:
    document = receipt_of(trail, "amended", reveal=True)
    text = json.dumps(document)
    for other in ("filler", "other", "denied", "plain", "waiting"):
        assert trail.runs[other] not in text
    assert "INV-3" not in text and "INV-6" not in text
    elided = [link for link in document["chain"] if link["type"] == "elided"]
    assert elided and all(
        set(link) == {"type", "from", "to", "prev_hash", "hash"} for link in elided
    )
    assert document["chain"][-1]["to"] == document["checkpoint"]["chain_seq"]


def test_sensitive_values_are_masked_unless_revealed(trail: Trail) -> None:
    sensitive = definition(
        Recorder(), approval=AMEND, sensitive_fields=("invoice_id", "/output/done/invoice_id")
    )
    masked = receipt_of(trail, "amended", definition=sensitive)
    assert "INV-2" not in json.dumps(masked["substance"])
    assert "value" not in masked["substance"]["input"] and "masked" in masked["substance"]["input"]
    assert masked["substance"]["output"]["masked"]["done"]["invoice_id"] == MASK
    summary = verify_receipt(masked, ring_check(trail.ring))
    assert summary.masked_values > 0
    withheld = receipt_of(trail, "amended")  # the action's sensitive fields unknown: digests only
    assert set(withheld["substance"]["input"]) == {"digest"}
    verify_receipt(withheld, ring_check(trail.ring))


def _event(document: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(link for link in document["chain"] if link.get("kind") == kind)


def _events(document: dict[str, Any]) -> list[int]:
    return [n for n, link in enumerate(document["chain"]) if link["type"] == "event"]


def _edit_event(document: dict[str, Any]) -> None:
    _event(document, "approval_recorded")["actor"] = "mallory"


def _forge_event_and_hashes(document: dict[str, Any]) -> None:
    """A forger who edits an event and recomputes every hash a verifier can recompute: the
    run's events after it, up to the first elided stretch (or the checkpoint's head hash)."""
    from signoff.audit.receipt_check import digest
    from signoff.core.chain import EVENT_FORMAT

    chain = document["chain"]
    n = next(i for i, link in enumerate(chain) if link.get("kind") == "approval_recorded")
    chain[n]["data"]["reason"] = "approved by the board"
    previous: str = chain[n]["prev_hash"]
    for link in chain[n:]:
        link["prev_hash"] = previous
        if link["type"] == "elided":
            return  # its hash cannot be recomputed: the attestation vouches for it
        body = {
            "format": EVENT_FORMAT,
            "tenant_id": document["tenant_id"],
            "chain_seq": link["from"],
            "prev_hash": link["prev_hash"],
            **{k: link[k] for k in ("run_id", "kind", "at", "actor", "status", "code", "data")},
        }
        link["hash"] = previous = digest(body)
    document["checkpoint"]["head_hash"] = previous


def _drop_event(document: dict[str, Any]) -> None:
    del document["chain"][_events(document)[2]]


def _reorder(document: dict[str, Any]) -> None:
    chain = document["chain"]
    first, second = _events(document)[1:3]
    chain[first], chain[second] = chain[second], chain[first]


def _widen_elided(document: dict[str, Any]) -> None:
    """An elided stretch made to swallow one of the run's events (hiding it)."""
    chain = document["chain"]
    n = next(i for i, link in enumerate(chain) if link["type"] == "elided")
    swallowed = chain.pop(n + 1)
    chain[n]["to"], chain[n]["hash"] = swallowed["to"], swallowed["hash"]


def _set(*path: str | int, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _flip(signature: str) -> str:
    return ("B" if signature[0] == "A" else "A") + signature[1:]


TAMPERING: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("an event body edited", _edit_event, "RECEIPT_EVENT_EDITED"),
    ("an event and its hash forged", _forge_event_and_hashes, "RECEIPT_SIGNATURE_INVALID"),
    ("an event dropped", _drop_event, "RECEIPT_CHAIN_BROKEN"),
    ("two events reordered", _reorder, "RECEIPT_CHAIN_BROKEN"),
    ("an event hidden in an elided stretch", _widen_elided, "RECEIPT_SIGNATURE_INVALID"),
    (
        "a digest edited",
        _set("substance", "input", "digest", value="0" * 64),
        "RECEIPT_DIGEST_MISMATCH",
    ),
    (
        "an output digest edited",
        _set("substance", "output", "digest", value="f" * 64),
        "RECEIPT_DIGEST_MISMATCH",
    ),
    (
        "a revealed value edited",
        _set("substance", "approved_input", "value", "amount", value=40),
        "RECEIPT_VALUE_MISMATCH",
    ),
    (
        "a revealed output edited",
        _set("substance", "result", "value", "output", "done", "amount", value=1),
        "RECEIPT_VALUE_MISMATCH",
    ),
    (
        "a decision's approver edited",
        _set("decisions", 0, "decision", "approver_id", value="mallory"),
        "RECEIPT_VALUE_MISMATCH",
    ),
    ("a decision dropped", lambda d: d["decisions"].pop(), "RECEIPT_DIGEST_MISMATCH"),
    ("the resource edited", _set("resource", value="invoice/INV-666"), "RECEIPT_APPROVAL_MISMATCH"),
    (
        "the checkpoint moved",
        _set("checkpoint", "chain_seq", value=1),
        "RECEIPT_CHECKPOINT_MISMATCH",
    ),
    ("the run id edited", _set("run_id", value="run-0000"), "RECEIPT_FOREIGN_EVENT"),
    ("the tenant edited", _set("tenant_id", value="other"), "RECEIPT_EVENT_EDITED"),
    ("the format unknown", _set("format", value="signoff.receipt.v0"), "RECEIPT_MALFORMED"),
    ("the chain emptied", _set("chain", value=[]), "RECEIPT_MALFORMED"),
    (
        "a naive attestation time",
        _set("attestation", "at", value="2026-12-02"),
        "RECEIPT_MALFORMED",
    ),
    ("a data that is a list", _set("chain", 0, "data", value=[1]), "RECEIPT_EVENT_EDITED"),
]


@pytest.mark.parametrize(("what", "change", "code"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_an_edited_receipt_fails_with_its_code(
    signed: Trail, what: str, change: Callable[[dict[str, Any]], None], code: str
) -> None:
    original = receipt_of(signed, "amended", reveal=True)
    verify_receipt(copy.deepcopy(original), ring_check(signed.ring))
    document = copy.deepcopy(original)
    change(document)
    assert problem(signed, document) == code, what


def test_a_signature_edited_or_made_by_another_key_fails(signed: Trail, tmp_path: Path) -> None:
    original = receipt_of(signed, "amended")
    for part in ("checkpoint", "attestation"):
        document = copy.deepcopy(original)
        document[part]["signature"] = _flip(document[part]["signature"])
        assert problem(signed, document) == "RECEIPT_SIGNATURE_INVALID"
    stranger, _, _ = _keys(tmp_path)
    with pytest.raises(ReceiptProblem) as found:
        verify_receipt(original, ring_check(stranger))
    assert found.value.code == "RECEIPT_SIGNATURE_INVALID"
    renamed = copy.deepcopy(original)
    renamed["checkpoint"]["key_id"] = "k9"
    assert problem(signed, renamed) == "RECEIPT_KEY_UNKNOWN"


def _sql(db: Path, statement: str, *args: Any) -> None:
    with sqlite3.connect(db) as raw:
        raw.execute(statement, args)


def test_a_run_edited_in_the_store_before_its_receipt_gets_none(trail: Trail) -> None:
    with sqlite3.connect(trail.db) as raw:
        [(data,)] = raw.execute(
            "SELECT data FROM signoff_runs WHERE run_id = ?", (trail.runs["amended"],)
        )
    document = json.loads(data)
    document["approved_input"]["amount"] = 1_000_000
    _sql(
        trail.db,
        "UPDATE signoff_runs SET data = ? WHERE run_id = ?",
        json.dumps(document),
        trail.runs["amended"],
    )
    assert refusal(trail, "amended", reveal=True) == Code.RECEIPT_RUN_INCONSISTENT


def test_another_run_edited_inside_the_stretch_refuses_the_receipt(trail: Trail) -> None:
    _sql(
        trail.db,
        "UPDATE signoff_audit_events SET actor = 'mallory' WHERE run_id = ?",
        trail.runs["filler"],
    )
    assert refusal(trail, "amended") == Code.RECEIPT_TRAIL_INCONSISTENT


def test_a_forged_checkpoint_refuses_the_receipt(trail: Trail) -> None:
    _sql(trail.db, "UPDATE signoff_audit_checkpoints SET head_hash = ?", "0" * 64)
    assert refusal(trail, "amended") == Code.RECEIPT_TRAIL_INCONSISTENT


def test_a_waiting_run_and_one_after_the_last_checkpoint_get_no_receipt_yet(trail: Trail) -> None:
    assert refusal(trail, "waiting") == Code.RECEIPT_RUN_NOT_FINISHED

    async def later() -> str:
        store = await open_store(url(trail.db), upgrade=False)
        try:
            runtime = Runtime(registry(), store)
            outcome = await runtime.propose(
                proposal({"invoice_id": "INV-7", "amount": 1}, key="k7")
            )
            await runtime.drain()
            return outcome.run_id
        finally:
            await store.close()

    trail.runs["late"] = asyncio.run(later())
    assert refusal(trail, "late") == Code.RECEIPT_NOT_ANCHORED
    assert refusal(trail, "plain", tenant_id="other") == Code.ACTION_RUN_NOT_FOUND

    async def sign() -> None:
        store = await open_store(url(trail.db), upgrade=False)
        try:
            await checkpoint_heads(store, trail.ring, NOW)
        finally:
            await store.close()

    asyncio.run(sign())
    verify_receipt(receipt_of(trail, "late"), ring_check(trail.ring))


def test_the_cli_writes_a_receipt_and_verifies_it_with_the_public_key(trail: Trail) -> None:
    target = trail.db.parent / "receipt.json"
    made = runner.invoke(
        app,
        [
            "audit",
            "receipt",
            trail.runs["amended"][-12:],
            "--database",
            url(trail.db),
            "--keys",
            str(trail.ring_file),
            "--reveal",
            "-o",
            str(target),
        ],
    )
    assert made.exit_code == 0, made.output
    done = runner.invoke(
        app, ["audit", "verify-receipt", str(target), "--key", str(trail.public_key)]
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith(f"receipt of run {trail.runs['amended']} holds: SUCCEEDED")

    document = json.loads(target.read_text())
    _edit_event(document)
    target.write_text(json.dumps(document))
    done = runner.invoke(
        app, ["audit", "verify-receipt", str(target), "--key", str(trail.public_key)]
    )
    assert done.exit_code == 1
    assert done.stderr.strip().endswith("[RECEIPT_EVENT_EDITED]")
    for text in ("{not json", "[" * 100_000 + "]" * 100_000, "[1, 2]"):
        target.write_text(text)
        done = runner.invoke(
            app, ["audit", "verify-receipt", str(target), "--key", str(trail.public_key)]
        )
        assert done.exit_code == 1 and done.stderr.strip().endswith("[RECEIPT_MALFORMED]")


def test_the_cli_refuses_an_unanchored_run_or_checkpoints_first_when_asked(trail: Trail) -> None:
    async def later() -> str:
        store = await open_store(url(trail.db), upgrade=False)
        try:
            outcome = await Runtime(registry(), store).propose(
                proposal({"invoice_id": "INV-8", "amount": 2}, key="k8")
            )
            return outcome.run_id
        finally:
            await store.close()

    run_id = asyncio.run(later())
    base = ["audit", "receipt", run_id, "--database", url(trail.db), "--keys", str(trail.ring_file)]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 1
    assert refused.stderr.strip().endswith("[RECEIPT_NOT_ANCHORED]")
    made = runner.invoke(app, [*base, "--checkpoint"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["run_id"] == run_id
    unsigned = runner.invoke(app, ["audit", "receipt", run_id, "--database", url(trail.db)])
    assert unsigned.stderr.strip().endswith("[RECEIPT_KEYS_MISSING]")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            found += _paths(value, (*here, n))
    return found


@pytest.fixture(scope="module")
def pristine(signed: Trail) -> dict[str, Any]:
    return receipt_of(signed, "amended", reveal=True)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_edit_anywhere_is_a_stable_code_never_a_crash(
    signed: Trail, pristine: dict[str, Any], data: st.DataObject
) -> None:
    document = copy.deepcopy(pristine)
    path = data.draw(st.sampled_from(_paths(document)[1:]))
    value = data.draw(JSON)
    node: Any = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    try:
        verify_receipt(document, ring_check(signed.ring))
    except ReceiptProblem as found:
        assert found.code.startswith("RECEIPT_")
