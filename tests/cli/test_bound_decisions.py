"""`signoff approvals` on the database, bound to what the operator saw: `show` prints the input
that will run, the amendment record, the approvals still needed and the version; a decision on
an older `--version` is refused (exit 4, `APPROVAL_RUN_CHANGED`, the fresh view printed) and
deciding again on the fresh view counts."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner, Result

from signoff import ActionProposal, Channel, Code, Principal, ProposerType
from signoff.app import Application, Settings, build_application
from signoff.cli import app as cli
from signoff.cli.approvals import RUN_CHANGED
from signoff.core.approvals import DecisionRequest
from signoff.core.run import ApprovalVote, RunStatus
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.demo.invoices.db import ensure_seeded
from tests.store.conftest import run_isolated

T = TypeVar("T")
AGENT = Principal(id="agent-1", roles=("billing",))
LEAD1 = Principal(id="lead-1", roles=("billing-lead",))


def two_lead_manifests(tmp_path: Path) -> Path:
    """The demo manifests, with the reminder needing two leads."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for source in Path(DEMO_MANIFESTS).glob("*.yaml"):
        text = source.read_text()
        if source.name == "invoice-send-reminder.yaml":
            old = "approvers: {roles: [billing-lead]}"
            assert old in text
            text = text.replace(old, "approvers: {roles: [billing-lead], count: 2}")
            text = text.split("\ntests:\n")[0] + "\n"
        (manifests / source.name).write_text(text)
    return manifests


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A database and the demo manifests, with the reminder needing two leads."""
    monkeypatch.setenv("SIGNOFF_DEMO_INVOICES_DB", str(tmp_path / "invoices.db"))
    ensure_seeded("acme")
    return f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}", two_lead_manifests(tmp_path)


def _with(database: str, manifests: Path, work: Callable[[Application], Awaitable[T]]) -> T:
    async def main() -> T:
        application = await build_application(
            Settings(database_url=database, manifests_dir=manifests)
        )
        try:
            return await work(application)
        finally:
            await application.close()

    return run_isolated(main)


def _invoke(database: str, manifests: Path, *args: str) -> Result:
    runner = CliRunner(env={"COLUMNS": "300", "TERM": "dumb"})
    return runner.invoke(cli, [*args, "--database", database, "--manifests", str(manifests)])


def _amended(database: str, manifests: Path) -> tuple[str, int, int]:
    """A firm reminder lead-1 softened to friendly and approved (one of two): the run id, the
    version before the amendment and the version now."""

    async def work(application: Application) -> tuple[str, int, int]:
        runtime = application.runtime
        outcome = await runtime.propose(
            ActionProposal(
                action_id="invoice.send_reminder",
                input={"invoice_id": "INV-1006", "tone": "firm"},
                principal=AGENT,
                tenant_id="acme",
                channel=Channel.MCP,
                proposer_type=ProposerType.AGENT,
                idempotency_key="r-1",
            )
        )
        assert outcome.code == Code.APPROVAL_REQUIRED
        shown = await runtime.get_run(outcome.run_id, "acme")
        assert shown is not None
        result = await runtime.decide(
            outcome.run_id,
            "acme",
            DecisionRequest(
                approver=LEAD1,
                vote=ApprovalVote.APPROVE,
                amendments={"tone": "friendly"},
                expected_version=shown.version,
                dispatch=False,
            ),
        )
        assert result.code == Code.APPROVAL_RECORDED, result
        now = await runtime.get_run(outcome.run_id, "acme")
        assert now is not None
        return outcome.run_id, shown.version, now.version

    return _with(database, manifests, work)


def test_show_prints_what_will_run_the_amendment_and_the_approvals_still_needed(
    setup: tuple[str, Path],
) -> None:
    database, manifests = setup
    run_id, _before, now = _amended(database, manifests)
    table = _invoke(database, manifests, "approvals", "show", run_id, "--tenant", "acme")
    assert table.exit_code == 0, table.output
    assert "will run" in table.stdout and "tone: friendly" in table.stdout
    assert "amendment 1" in table.stdout and "tone firm → friendly" in table.stdout
    assert "1 more needed" in table.stdout
    assert re.search(rf"version\s*│\s*{now}\s", table.stdout), table.stdout
    as_json = _invoke(
        database, manifests, "approvals", "show", run_id, "--tenant", "acme", "--json"
    )
    view = json.loads(as_json.stdout)
    assert view["input"]["tone"] == "friendly" and view["proposed_input"]["tone"] == "firm"
    assert view["version"] == now and view["approval"]["approvals_still_needed"] == 1
    listed = _invoke(database, manifests, "approvals", "list", "--tenant", "acme")
    assert "tone: friendly" in listed.stdout and "(amended)" in listed.stdout
    assert "1 more needed" in listed.stdout


def test_a_decision_on_an_older_version_exits_4_and_deciding_again_counts(
    setup: tuple[str, Path],
) -> None:
    database, manifests = setup
    run_id, before, now = _amended(database, manifests)
    lead2 = ["--as", "lead-2", "--tenant", "acme", "--roles", "billing-lead"]
    stale = _invoke(
        database, manifests, "approvals", "approve", run_id, "--version", str(before), *lead2
    )
    assert stale.exit_code == RUN_CHANGED == 4, stale.output
    assert stale.stderr.strip().endswith("[APPROVAL_RUN_CHANGED]")
    assert f"version {now}" in stale.stderr
    assert "tone: friendly" in stale.stdout  # the fresh view

    async def state(application: Application) -> tuple[RunStatus, int]:
        run = await application.runtime.get_run(run_id, "acme")
        assert run is not None and run.approval is not None
        return run.status, len(run.approval.decisions)

    assert _with(database, manifests, state) == (RunStatus.WAITING_APPROVAL, 1)
    again = _invoke(
        database, manifests, "approvals", "approve", run_id, "--version", str(now), *lead2, "--json"
    )
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["code"] == Code.APPROVAL_AWAITING_DISPATCH


def test_without_a_version_the_cli_prints_the_run_and_binds_to_it(
    setup: tuple[str, Path],
) -> None:
    database, manifests = setup
    run_id, _before, _now = _amended(database, manifests)
    lead2 = ["--as", "lead-2", "--tenant", "acme", "--roles", "billing-lead"]
    approved = _invoke(database, manifests, "approvals", "approve", run_id, *lead2)
    assert approved.exit_code == 0, approved.output
    assert "tone: friendly" in approved.stdout and "APPROVAL_AWAITING_DISPATCH" in approved.stdout
