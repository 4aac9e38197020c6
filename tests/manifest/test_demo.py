"""The demo manifests load, their tests: cases pass, and the invoice executors really work."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from signoff import ExecutionContext, ExecutionStatus, Principal
from signoff.core.codes import Code
from signoff.core.runtime import Runtime
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.demo.invoices import executors
from signoff.demo.invoices.db import ensure_seeded
from signoff.manifest import ManifestSet, load_manifests, run_cases
from tests.helpers import AGENT, LEAD, approve, memory_runtime, proposal

MANIFESTS = DEMO_MANIFESTS


@pytest.fixture
def demo_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "invoices.db"
    monkeypatch.setenv("SIGNOFF_DEMO_INVOICES_DB", str(path))
    ensure_seeded("acme")
    return path


@pytest.fixture
def demo() -> ManifestSet:
    return load_manifests(MANIFESTS)


@pytest.fixture
def runtime(demo: ManifestSet, demo_db: Path) -> Iterator[Runtime]:
    yield memory_runtime(*(action.definition for action in demo.compiled))


def status_of(db: Path, invoice_id: str, tenant: str = "acme") -> str:
    with closing(sqlite3.connect(db)) as connection:
        row = connection.execute(
            "SELECT status FROM invoices WHERE tenant_id = ? AND invoice_id = ?",
            (tenant, invoice_id),
        ).fetchone()
    return str(row[0])


def reminders(db: Path) -> int:
    with closing(sqlite3.connect(db)) as connection:
        return int(connection.execute("SELECT count(*) FROM reminders").fetchone()[0])


def test_the_demo_manifests_load_and_every_test_case_passes(demo: ManifestSet) -> None:
    results = run_cases(demo)

    assert len(results) >= 12
    assert [(r.action_id, r.name) for r in results if not r.passed] == []


def test_the_demo_covers_a_read_an_approval_a_deny_rule_and_async_work(demo: ManifestSet) -> None:
    definitions = {action.id: action.definition for action in demo.compiled}

    assert definitions["invoice.list"].effect == "read_only"
    assert definitions["invoice.get"].effect == "read_only"
    cancel = definitions["invoice.cancel"]
    assert cancel.approval.when == "input.amount > 1000.0"
    assert cancel.approval.approver_roles == ("billing-lead",)
    assert cancel.policy.roles == ("billing", "billing-lead")
    assert [rule.code for rule in cancel.policy.deny] == ["AMOUNT_OVER_LIMIT"]
    assert cancel.guard is not None
    assert definitions["invoice.send_reminder"].mode == "async"


async def test_a_small_cancellation_changes_the_invoice(runtime: Runtime, demo_db: Path) -> None:
    outcome = await runtime.propose(proposal({"invoice_id": "INV-1001", "amount": 250.0}))

    assert (outcome.status, outcome.code) == (ExecutionStatus.SUCCEEDED, Code.SUCCEEDED)
    assert outcome.output is not None and outcome.output["status"] == "cancelled"
    assert status_of(demo_db, "INV-1001") == "cancelled"
    assert status_of(demo_db, "INV-1002") == "open"


async def test_a_large_cancellation_waits_for_a_billing_lead(
    runtime: Runtime, demo_db: Path
) -> None:
    waiting = await runtime.propose(proposal({"invoice_id": "INV-1002", "amount": 4200.0}))
    assert (waiting.status, waiting.code) == (
        ExecutionStatus.PENDING_APPROVAL,
        Code.APPROVAL_REQUIRED,
    )
    assert status_of(demo_db, "INV-1002") == "open"

    decided = await runtime.decide(waiting.run_id, "acme", approve(LEAD))

    assert decided.outcome is not None and decided.outcome.code == Code.SUCCEEDED
    assert status_of(demo_db, "INV-1002") == "cancelled"


@pytest.mark.parametrize(
    ("invoice_id", "amount", "code"),
    [
        ("INV-1003", 980.0, "INVOICE_NOT_OPEN"),  # already paid
        ("INV-1001", 25.0, "INVOICE_AMOUNT_MISMATCH"),  # not what the invoice says
        ("INV-9999", 10.0, "INVOICE_NOT_FOUND"),
    ],
)
async def test_the_guard_refuses_what_is_no_longer_true(
    runtime: Runtime, demo_db: Path, invoice_id: str, amount: float, code: str
) -> None:
    outcome = await runtime.propose(proposal({"invoice_id": invoice_id, "amount": amount}))

    assert (outcome.status, outcome.code) == (ExecutionStatus.DENIED, code)


async def test_the_guard_checks_again_after_the_approval_wait(
    runtime: Runtime, demo_db: Path
) -> None:
    waiting = await runtime.propose(proposal({"invoice_id": "INV-1002", "amount": 4200.0}))
    with closing(sqlite3.connect(demo_db)) as connection, connection:
        connection.execute("UPDATE invoices SET status = 'paid' WHERE invoice_id = 'INV-1002'")

    decided = await runtime.decide(waiting.run_id, "acme", approve(LEAD))

    assert decided.outcome is not None
    assert (decided.outcome.status, decided.outcome.code) == (
        ExecutionStatus.DENIED,
        "INVOICE_NOT_OPEN",
    )


async def test_a_friendly_reminder_is_sent_in_the_background(
    runtime: Runtime, demo_db: Path
) -> None:
    accepted = await runtime.propose(
        proposal({"invoice_id": "INV-1006"}, action="invoice.send_reminder")
    )
    assert (accepted.status, accepted.code) == (ExecutionStatus.ACCEPTED, Code.ACTION_ACCEPTED)

    await runtime.drain()
    final = await runtime.get(accepted.run_id, "acme")

    assert final is not None and final.code == Code.SUCCEEDED
    assert final.output is not None and final.output["sent_to"] == "ap@stark.example"
    assert reminders(demo_db) == 1


async def test_reads_list_the_tenants_own_invoices(runtime: Runtime, demo_db: Path) -> None:
    await runtime.propose(proposal({"invoice_id": "INV-1001", "amount": 250.0}))

    mine = await runtime.propose(proposal({"status": "open"}, action="invoice.list"))
    theirs = await runtime.propose(
        proposal({"status": "open"}, action="invoice.list", tenant="globex")
    )
    missing = await runtime.propose(proposal({"invoice_id": "INV-4242"}, action="invoice.get"))

    assert mine.output is not None and theirs.output is not None
    assert "INV-1001" not in [row["invoice_id"] for row in mine.output["invoices"]]
    assert "INV-1001" in [row["invoice_id"] for row in theirs.output["invoices"]]
    assert (missing.status, missing.code) == (ExecutionStatus.FAILED, "INVOICE_NOT_FOUND")


def context(operation: str, action: str, **input: Any) -> ExecutionContext:
    return ExecutionContext(
        run_id=operation.split(":")[0],
        action_id=action,
        tenant_id="acme",
        principal=Principal(id=AGENT.id, roles=AGENT.roles),
        input=input,
        resource=f"invoice/{input['invoice_id']}",
        attempt_token=operation.split(":")[1],
        operation_id=operation,
    )


def test_a_redispatched_cancellation_replays_its_result(demo_db: Path) -> None:
    attempt = context("run-1:a1", "invoice.cancel", invoice_id="INV-1006", amount=75.5)

    first = executors.cancel_invoice(attempt)
    again = executors.cancel_invoice(attempt)
    other = executors.cancel_invoice(
        context("run-2:a1", "invoice.cancel", invoice_id="INV-1006", amount=75.5)
    )

    assert first == again
    assert first.code == Code.SUCCEEDED
    assert other.code == "INVOICE_ALREADY_CANCELLED"


def test_a_redispatched_reminder_is_sent_once(demo_db: Path) -> None:
    attempt = context("run-1:a1", "invoice.send_reminder", invoice_id="INV-1006")

    first = executors.send_reminder(attempt)
    again = executors.send_reminder(attempt)

    assert first == again and first.code == Code.SUCCEEDED
    assert reminders(demo_db) == 1
