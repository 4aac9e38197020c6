"""The operator's CLI and the approvers' API on one SQLite file, with the demo manifests."""

from __future__ import annotations

import getpass
import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from typer.testing import CliRunner

from signoff import ActionProposal, Channel, Code, Principal, ProposerType
from signoff.app import Application, Settings, build_application
from signoff.cli import app as cli
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.demo.invoices.db import ensure_seeded
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier
from signoff.surfaces.mcp.http import BearerAuth, HttpOptions, build_http_app
from signoff.surfaces.web import build_web
from tests.store.conftest import run_isolated
from tests.web.support import BASE_URL, JWT_SECRET, token, web_config

MANIFESTS = DEMO_MANIFESTS
AGENT = Principal(id="agent-1", roles=("billing",))
runner = CliRunner()
T = TypeVar("T")


@dataclass
class Demo:
    database: str
    invoices: Path
    cancel_run: str
    reminder_run: str

    def cli(self, *args: str) -> Any:
        return runner.invoke(
            cli, [*args, "--database", self.database, "--manifests", str(MANIFESTS)]
        )

    def invoice_status(self, invoice_id: str) -> str:
        with closing(sqlite3.connect(self.invoices)) as connection:
            row = connection.execute(
                "SELECT status FROM invoices WHERE tenant_id = 'acme' AND invoice_id = ?",
                (invoice_id,),
            ).fetchone()
        return str(row[0])


def with_application(database: str, work: Callable[[Application], Awaitable[T]]) -> T:
    async def main() -> T:
        application = await build_application(
            Settings(database_url=database, manifests_dir=MANIFESTS)
        )
        try:
            return await work(application)
        finally:
            await application.close()

    return run_isolated(main)


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    invoices = tmp_path / "invoices.db"
    monkeypatch.setenv("SIGNOFF_DEMO_INVOICES_DB", str(invoices))
    ensure_seeded("acme")
    database = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"

    async def propose(application: Application) -> tuple[str, str]:
        runs = []
        for action, data, key in (
            (
                "invoice.cancel",
                {
                    "invoice_id": "INV-1002",
                    "amount": 4200.0,
                    "reason": "duplicate of INV-1001",
                    "customer_note": "Jane Doe called",
                },
                "c-1",
            ),
            ("invoice.send_reminder", {"invoice_id": "INV-1006", "tone": "firm"}, "r-1"),
        ):
            outcome = await application.runtime.propose(
                ActionProposal(
                    action_id=action,
                    input=data,
                    principal=AGENT,
                    tenant_id="acme",
                    channel=Channel.MCP,
                    proposer_type=ProposerType.AGENT,
                    idempotency_key=key,
                )
            )
            assert outcome.code == Code.APPROVAL_REQUIRED
            runs.append(outcome.run_id)
        return runs[0], runs[1]

    cancel_run, reminder_run = with_application(database, propose)
    return Demo(database, invoices, cancel_run, reminder_run)


def test_the_cli_lists_pending_runs_with_sensitive_input_masked(demo: Demo) -> None:
    listed = demo.cli("approvals", "list", "--tenant", "acme", "--json")
    assert listed.exit_code == 0, listed.output
    runs = json.loads(listed.stdout)["approvals"]
    assert {r["run_id"] for r in runs} == {demo.cancel_run, demo.reminder_run}
    cancel = next(r for r in runs if r["run_id"] == demo.cancel_run)
    assert cancel["input"]["invoice_id"] == "INV-1002" and "Jane" not in listed.stdout
    table = demo.cli(
        "approvals", "list", "--tenant", "acme", "--as", "lead-1", "--roles", "billing-lead"
    )
    assert table.exit_code == 0 and "2 runs waiting" in table.stdout
    other = demo.cli("approvals", "list", "--tenant", "globex", "--json")
    assert json.loads(other.stdout) == {"approvals": []}


def test_cli_approval_executes_the_run_and_refusals_exit_non_zero_with_the_code(
    demo: Demo,
) -> None:
    own = demo.cli(
        "approvals",
        "approve",
        demo.cancel_run,
        "--as",
        "agent-1",
        "--tenant",
        "acme",
        "--roles",
        "billing,billing-lead",
    )
    assert own.exit_code == 1
    assert own.stderr.strip().endswith(f"[{Code.APPROVER_NOT_ELIGIBLE}]")
    assert demo.invoice_status("INV-1002") == "open"

    approved = demo.cli(
        "approvals",
        "approve",
        demo.cancel_run,
        "--as",
        "lead-1",
        "--tenant",
        "acme",
        "--roles",
        "billing-lead",
        "--reason",
        "customer confirmed",
    )
    assert approved.exit_code == 0, approved.output
    # Decisions are data: the CLI records the approval and runs nothing itself ...
    assert f"[{Code.APPROVAL_AWAITING_DISPATCH}]" in approved.stdout
    assert demo.invoice_status("INV-1002") == "open"
    # ... and a serving process's housekeeping dispatches it through the same stages.
    assert with_application(demo.database, lambda app: app.runtime.dispatch_approved()) == 1
    assert demo.invoice_status("INV-1002") == "cancelled"

    again = demo.cli(
        "approvals",
        "approve",
        demo.cancel_run,
        "--as",
        "lead-2",
        "--tenant",
        "acme",
        "--roles",
        "billing-lead",
    )
    assert again.exit_code == 1 and f"[{Code.APPROVAL_NOT_PENDING}]" in again.stderr

    shown = demo.cli("approvals", "show", demo.cancel_run, "--tenant", "acme", "--json")
    (decision,) = json.loads(shown.stdout)["approval"]["decisions"]
    assert (decision["approver_id"], decision["channel"]) == ("lead-1", "cli")
    audit = runner.invoke(
        cli, ["runs", "show", demo.cancel_run, "--database", demo.database, "--json"]
    )
    events = json.loads(audit.stdout)["audit"]
    recorded = next(e for e in events if e["kind"] == "approved_awaiting_dispatch")
    assert recorded["actor"] == "lead-1" and recorded["data"]["via"] == getpass.getuser()
    dispatched = next(e for e in events if e["kind"] == "approved_dispatching")
    assert dispatched["actor"] == "lead-1"


def test_a_run_of_another_tenant_is_not_found_for_the_cli(demo: Demo) -> None:
    for args in (
        ("show", demo.cancel_run, "--tenant", "globex"),
        (
            "reject",
            demo.cancel_run,
            "--as",
            "lead-9",
            "--tenant",
            "globex",
            "--roles",
            "billing-lead",
        ),
        ("show", "no-such-run", "--tenant", "acme"),
    ):
        result = demo.cli("approvals", *args)
        assert result.exit_code == 1
        assert result.stderr.strip().endswith(f"[{Code.ACTION_RUN_NOT_FOUND}]")


def test_the_api_and_the_cli_share_one_database(demo: Demo) -> None:
    async def reject_over_http(application: Application) -> httpx.Response:
        verifier = JwtVerifier(JwtConfig(secret=JWT_SECRET))
        web = build_web(application.runtime, web_config(), verifier)
        app = build_http_app(
            application.runtime, BearerAuth(verifier, BASE_URL), HttpOptions(routes=web.routes)
        )
        headers = {"Authorization": f"Bearer {token(sub='lead-2', tenant='acme')}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=headers
        ) as http:
            listed = (await http.get("/api/approvals")).json()["approvals"]
            assert {r["run_id"] for r in listed} == {demo.cancel_run, demo.reminder_run}
            version = listed[[r["run_id"] for r in listed].index(demo.reminder_run)]["version"]
            return await http.post(
                f"/api/runs/{demo.reminder_run}/reject",
                json={"reason": "too harsh", "expected_version": version},
            )

    response = with_application(demo.database, reject_over_http)
    assert (response.status_code, response.json()["code"]) == (200, Code.APPROVAL_REJECTED)

    shown = demo.cli("approvals", "show", demo.reminder_run, "--tenant", "acme", "--json")
    run = json.loads(shown.stdout)
    assert run["status"] == "DENIED" and run["outcome"]["code"] == Code.APPROVAL_REJECTED
    assert run["approval"]["decisions"][0]["channel"] == "api"
    remaining = demo.cli("approvals", "list", "--tenant", "acme", "--json")
    assert [r["run_id"] for r in json.loads(remaining.stdout)["approvals"]] == [demo.cancel_run]
    late = demo.cli(
        "approvals",
        "approve",
        demo.reminder_run,
        "--as",
        "lead-1",
        "--tenant",
        "acme",
        "--roles",
        "billing-lead",
    )
    assert late.exit_code == 1 and f"[{Code.APPROVAL_NOT_PENDING}]" in late.stderr


def test_a_cli_approval_of_background_work_is_run_by_the_serving_process(demo: Demo) -> None:
    approved = demo.cli(
        "approvals",
        "approve",
        demo.reminder_run,
        "--as",
        "lead-1",
        "--tenant",
        "acme",
        "--roles",
        "billing-lead",
        "--json",
    )
    assert approved.exit_code == 0, approved.output
    assert json.loads(approved.stdout)["code"] == Code.APPROVAL_AWAITING_DISPATCH

    def reminders() -> list[str]:
        with closing(sqlite3.connect(demo.invoices)) as connection:
            sent = connection.execute("SELECT tone FROM reminders WHERE invoice_id = 'INV-1006'")
            return [row[0] for row in sent]

    assert reminders() == []
    # The serving process picks it up (and drains its background work on close).
    assert with_application(demo.database, lambda app: app.runtime.dispatch_approved()) == 1
    shown = demo.cli("approvals", "show", demo.reminder_run, "--tenant", "acme", "--json")
    assert json.loads(shown.stdout)["outcome"]["code"] == Code.SUCCEEDED
    assert reminders() == ["firm"]
