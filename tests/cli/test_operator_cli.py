"""The operator's CLI as an operator uses it: copyable short ids, readable results,
filters, and messages meant for people rather than agents."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from signoff import ActionProposal, Channel, Code, Principal, ProposerType
from signoff.app import Application
from signoff.cli import app as cli
from signoff.core import pipeline
from signoff.core.clock import new_run_id
from signoff.core.short_ids import short_id
from signoff.demo.invoices.db import ensure_seeded
from tests.web.test_end_to_end import MANIFESTS, with_application

ROOT = Path(__file__).resolve().parents[2]
AGENT = Principal(id="agent-1", roles=("billing",))
OTHER = Principal(id="agent-2", roles=("billing",))
LEAD = ["--as", "lead-1", "--tenant", "acme", "--roles", "billing-lead"]


def _invoke(database: str, *args: str, columns: int = 80) -> Result:
    runner = CliRunner(env={"COLUMNS": str(columns), "TERM": "dumb"})
    manifests = ["--manifests", str(MANIFESTS)] if args[0] == "approvals" else []
    return runner.invoke(cli, [*args, "--database", database, *manifests])


def _propose(
    database: str, *calls: tuple[str, dict[str, object], str, Principal]
) -> list[tuple[str, str]]:
    async def work(application: Application) -> list[tuple[str, str]]:
        answers = []
        for action, data, key, principal in calls:
            outcome = await application.runtime.propose(
                ActionProposal(
                    action_id=action,
                    input=data,
                    principal=principal,
                    tenant_id="acme",
                    channel=Channel.MCP,
                    proposer_type=ProposerType.AGENT,
                    idempotency_key=key,
                )
            )
            answers.append((outcome.run_id, str(outcome.code)))
        return answers

    return with_application(database, work)


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SIGNOFF_DEMO_INVOICES_DB", str(tmp_path / "invoices.db"))
    ensure_seeded("acme")
    return f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"


def test_tables_at_80_columns_show_each_runs_short_id_whole_on_one_line(database: str) -> None:
    runs = _propose(
        database,
        ("invoice.cancel", {"invoice_id": "INV-1002", "amount": 4200.0}, "c-1", AGENT),
        ("invoice.send_reminder", {"invoice_id": "INV-1006", "tone": "firm"}, "r-1", AGENT),
    )
    listed = _invoke(database, "approvals", "list", "--tenant", "acme", columns=80)
    in_runs = _invoke(database, "runs", "list", columns=80)
    for table in (listed, in_runs):
        assert table.exit_code == 0, table.output
        lines = table.stdout.splitlines()
        assert max(map(len, lines)) <= 80
        for run_id, _ in runs:
            assert any(short_id(run_id) in line for line in lines), table.stdout


@pytest.fixture
def tails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The random tails the next runs get, in order."""
    wanted: list[str] = []

    def chosen() -> Iterator[str]:
        while True:
            real = new_run_id()
            yield real[:-12] + wanted.pop(0) if wanted else real

    ids = chosen()
    monkeypatch.setattr(pipeline, "new_run_id", lambda: next(ids))
    return wanted


def test_a_short_id_or_a_start_of_it_names_a_run_and_a_shared_start_is_refused(
    database: str, tails: list[str]
) -> None:
    tails.extend(["abcdef111111", "abcdef222222"])
    (cancel, _), (reminder, _) = _propose(
        database,
        ("invoice.cancel", {"invoice_id": "INV-1002", "amount": 4200.0}, "c-1", AGENT),
        ("invoice.send_reminder", {"invoice_id": "INV-1006", "tone": "firm"}, "r-1", AGENT),
    )
    shown = _invoke(database, "approvals", "show", "abcdef111111", "--tenant", "acme")
    ambiguous = _invoke(database, "approvals", "approve", "abcdef", *LEAD)
    approved = _invoke(database, "approvals", "approve", "ABCDEF1", *LEAD)
    in_runs = _invoke(database, "runs", "show", "abcdef2")
    too_short = _invoke(database, "runs", "show", "abcde")
    assert shown.exit_code == 0 and cancel in shown.stdout
    assert ambiguous.exit_code == 1
    assert ambiguous.stderr.strip().endswith("[RUN_ID_AMBIGUOUS]")
    assert approved.exit_code == 0, approved.output
    # The CLI records the decision; a serving process dispatches it (contract §8).
    assert f"[APPROVAL_AWAITING_DISPATCH]; run {cancel} resumes" in approved.stdout
    assert in_runs.exit_code == 0 and reminder in in_runs.stdout
    assert too_short.exit_code == 1
    assert too_short.stderr.strip().endswith("[ACTION_RUN_NOT_FOUND]")


def test_a_short_id_is_looked_up_in_the_tenant_given_only(database: str, tails: list[str]) -> None:
    tails.append("abcdef111111")
    _propose(
        database,
        ("invoice.cancel", {"invoice_id": "INV-1002", "amount": 4200.0}, "c-1", AGENT),
    )
    here = _invoke(database, "approvals", "show", "abcdef", "--tenant", "acme")
    elsewhere = _invoke(database, "approvals", "show", "abcdef", "--tenant", "globex")
    assert here.exit_code == 0, here.output
    assert elsewhere.exit_code == 1
    assert elsewhere.stderr.strip().endswith("[ACTION_RUN_NOT_FOUND]")


def test_a_run_waiting_for_approval_reads_pending_approval_and_either_name_filters(
    database: str,
) -> None:
    ((cancel, code),) = _propose(
        database,
        ("invoice.cancel", {"invoice_id": "INV-1002", "amount": 4200.0}, "c-1", AGENT),
    )
    assert code == Code.APPROVAL_REQUIRED
    pending = _invoke(database, "runs", "list", "--status", "PENDING_APPROVAL")
    alias = _invoke(database, "runs", "list", "--status", "waiting_approval")
    unknown = _invoke(database, "runs", "list", "--status", "LIMBO")
    shown = _invoke(database, "runs", "show", cancel)
    assert pending.exit_code == alias.exit_code == 0, pending.output
    assert short_id(cancel) in pending.stdout and short_id(cancel) in alias.stdout
    assert "PENDING_APPROVAL" in pending.stdout and "WAITING_APPROVAL" not in pending.stdout
    assert "PENDING_APPROVAL" in shown.stdout and "WAITING_APPROVAL" not in shown.stdout
    assert unknown.exit_code == 2
    assert unknown.stderr.strip().endswith("[INVALID_ARGUMENT]")


def test_approving_background_work_tells_the_operator_a_command_not_an_agent_tool(
    database: str,
) -> None:
    ((reminder, code),) = _propose(
        database,
        ("invoice.send_reminder", {"invoice_id": "INV-1006", "tone": "firm"}, "r-1", AGENT),
    )
    assert code == Code.APPROVAL_REQUIRED
    approved = _invoke(database, "approvals", "approve", reminder, *LEAD)
    assert approved.exit_code == 0, approved.output
    assert "signoff_get_run" not in approved.stdout
    assert "get_run" not in approved.stdout and "poll" not in approved.stdout
    assert f"signoff runs show {reminder}" in approved.stdout


def test_runs_show_prints_the_result_once_and_the_output(database: str) -> None:
    ((read, code),) = _propose(database, ("invoice.get", {"invoice_id": "INV-1001"}, "g-1", AGENT))
    assert code == Code.SUCCEEDED
    shown = _invoke(database, "runs", "show", read, columns=120)
    assert shown.exit_code == 0, shown.output
    assert "SUCCEEDED SUCCEEDED" not in shown.stdout
    assert "SUCCEEDED · retry NEVER" in shown.stdout
    assert "output" in shown.stdout and "INV-1001" in shown.stdout


def test_runs_list_filters_by_action_principal_code_and_time(database: str) -> None:
    runs = _propose(
        database,
        ("invoice.get", {"invoice_id": "INV-1001"}, "g-1", AGENT),
        ("invoice.get", {"invoice_id": "INV-404"}, "g-2", OTHER),
        ("invoice.cancel", {"invoice_id": "INV-1002", "amount": 4200.0}, "c-1", AGENT),
    )
    (found, _), (missing, missing_code), (pending, _) = runs

    def ids(*args: str) -> set[str]:
        listed = _invoke(database, "runs", "list", "--json", *args)
        assert listed.exit_code == 0, listed.output
        import json

        return {r["run_id"] for r in json.loads(listed.stdout)}

    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert ids("--action", "invoice.get") == {found, missing}
    assert ids("--principal", "agent-2") == {missing}
    assert ids("--code", missing_code) == {missing}
    assert ids("--action", "invoice.cancel", "--principal", "agent-1") == {pending}
    assert ids("--since", "1h") == {found, missing, pending}
    assert ids("--since", later) == set()
    assert ids("--until", "2020-01-01") == set()
    bad = _invoke(database, "runs", "list", "--since", "yesterday-ish")
    assert bad.exit_code == 1 and "[INVALID_ARGUMENT]" in bad.stderr


def test_the_agent_example_against_an_unreachable_server_prints_one_line() -> None:
    env = {**os.environ, "SIGNOFF_URL": "http://127.0.0.1:9/mcp", "SIGNOFF_TOKEN": "t"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_session.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Cannot reach signoff at" in done.stderr
