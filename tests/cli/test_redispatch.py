"""`signoff runs redispatch`: an operator's re-dispatch from the command line, on SQLite."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from signoff import ActionProposal, Channel, Principal, ProposerType
from signoff.app import Settings, build_application
from signoff.cli import app
from signoff.core.codes import Code
from signoff.core.short_ids import short_id
from tests.cli.repair_hooks import CALLS_ENV, MANIFEST

runner = CliRunner()


def _failed_run(tmp_path: Path, idempotent: bool) -> tuple[str, str, Path]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "erp.yaml").write_text(MANIFEST.replace("IDEMPOTENT", str(idempotent).lower()))
    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"

    async def work() -> str:
        application = await build_application(Settings(database_url=url, manifests_dir=manifests))
        try:
            outcome = await application.runtime.propose(
                ActionProposal(
                    action_id="erp.sync",
                    input={},
                    principal=Principal(id="agent-1"),
                    tenant_id="acme",
                    channel=Channel.MCP,
                    proposer_type=ProposerType.AGENT,
                )
            )
        finally:
            await application.close()
        assert (outcome.code, outcome.retry) == ("ERP_TIMEOUT", "MANUAL_REVIEW")
        return outcome.run_id

    return asyncio.run(work()), url, manifests


def _redispatch(run_id: str, url: str, manifests: Path, *extra: str) -> Result:
    return runner.invoke(
        app,
        [
            "runs", "redispatch", run_id, "--tenant", "acme", "--database", url,
            "--manifests", str(manifests), "--json", *extra,
        ],
    )  # fmt: skip


@pytest.mark.parametrize("short", [False, True], ids=["whole id", "short id"])
def test_an_operator_redispatches_from_the_cli_with_the_same_operation_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short: bool
) -> None:
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(calls))
    run_id, url, manifests = _failed_run(tmp_path, idempotent=True)

    result = _redispatch(
        short_id(run_id) if short else run_id,
        url,
        manifests,
        "--as",
        "lead-1",
        "--roles",
        "billing-lead",
        "--reason",
        "ERP ok",
    )

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout.splitlines()[0])
    assert (body["code"], body["redispatched"]) == (Code.SUCCEEDED, True)
    first, second = calls.read_text().splitlines()
    assert first == second
    verify = runner.invoke(app, ["audit", "verify", "--database", url])
    assert verify.exit_code == 0, verify.output  # the repair's trail is consistent with its runs


@pytest.mark.parametrize(
    ("idempotent", "extra", "code"),
    [
        (
            False,
            ("--as", "lead-1", "--roles", "billing-lead", "--reason", "x"),
            Code.REPAIR_NOT_IDEMPOTENT,
        ),
        (
            True,
            ("--as", "clerk", "--roles", "billing", "--reason", "x"),
            Code.APPROVER_NOT_ELIGIBLE,
        ),
        (
            True,
            ("--as", "lead-1", "--roles", "billing-lead", "--reason", " "),
            Code.INPUT_VALIDATION_FAILED,
        ),
    ],
)
def test_a_refused_redispatch_exits_1_with_its_code_and_calls_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    idempotent: bool,
    extra: tuple[str, ...],
    code: str,
) -> None:
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(calls))
    run_id, url, manifests = _failed_run(tmp_path, idempotent=idempotent)

    result = _redispatch(run_id, url, manifests, *extra)

    assert result.exit_code == 1
    assert f"[{code}]" in result.stderr
    assert len(calls.read_text().splitlines()) == 1
