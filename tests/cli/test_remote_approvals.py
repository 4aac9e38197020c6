"""`signoff approvals ... --server/--token`: a client of a real server process, which executes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff import Code
from signoff.cli import app
from signoff.core.short_ids import short_id
from tests.cli.server_support import AGENT, LEAD, Server, cli, serving
from tests.surfaces.support import http_client

pytestmark = pytest.mark.slow


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with serving(tmp_path) as served:
        yield served


async def propose(
    server: Server, action: str = "pay_send", to: str = "ACME Supplies", key: str = "p-1"
) -> str:
    async with http_client(server.url, AGENT) as agent:
        result = await agent.call_tool(action, {"to": to, "amount": 900, "idempotency_key": key})
    assert result.structured_content is not None
    assert result.structured_content["code"] == Code.APPROVAL_REQUIRED
    return str(result.structured_content["run_id"])


async def test_an_approval_over_the_api_executes_in_the_server_process_not_the_cli(
    server: Server,
) -> None:
    run_id = await propose(server)
    status, out, err, cli_pid = await cli(
        server,
        "approvals",
        "approve",
        run_id,
        "--server",
        server.url,
        "--reason",
        "invoice checked",
        "--json",
        SIGNOFF_TOKEN=LEAD,
        PAYMENTS_TOKEN="only-in-the-operators-shell",
    )
    assert status == 0, err
    answer = json.loads(out)
    assert answer["accepted"] is True and answer["code"] == Code.SUCCEEDED
    output = answer["outcome"]["output"]
    assert output["pid"] == server.pid != cli_pid
    assert output["payments_token"] is None

    status, out, err, _ = await cli(
        server, "approvals", "show", run_id, "--server", server.url, "--json", SIGNOFF_TOKEN=LEAD
    )
    assert status == 0, err
    shown = json.loads(out)
    assert shown["status"] == "SUCCEEDED"
    assert [d["approver_id"] for d in shown["approval"]["decisions"]] == ["lead-1"]
    assert shown["approval"]["decisions"][0]["channel"] == "api"


async def test_an_agent_token_on_the_cli_is_refused_by_the_server_and_nothing_is_decided(
    server: Server,
) -> None:
    run_id = await propose(server)
    status, _out, err, _ = await cli(
        server, "approvals", "approve", run_id, "--server", server.url, "--token", AGENT
    )
    assert status == 1
    assert err.strip().endswith(f"[{Code.INSUFFICIENT_SCOPE}]")
    status, out, err, _ = await cli(
        server, "approvals", "list", "--server", server.url, "--json", SIGNOFF_TOKEN=LEAD
    )
    assert status == 0, err
    assert [run["run_id"] for run in json.loads(out)["approvals"]] == [run_id]


async def test_an_approval_the_guard_then_denies_exits_3_with_the_runs_code(
    server: Server,
) -> None:
    run_id = await propose(server, "pay_guarded", to="Blocked Ltd")
    status, out, err, _ = await cli(
        server, "approvals", "approve", run_id, "--server", server.url, SIGNOFF_TOKEN=LEAD
    )
    assert status == 3, err
    assert f"run {run_id} is now DENIED [{Code.PRE_EXECUTION_DENIED}]" in out
    assert err.strip().endswith(f"[{Code.PRE_EXECUTION_DENIED}]")


async def test_a_rejection_that_denies_the_run_exits_0(server: Server) -> None:
    run_id = await propose(server)
    status, _, err, _ = await cli(
        server, "approvals", "reject", run_id, "--server", server.url, SIGNOFF_TOKEN=LEAD
    )
    assert status == 0, err


async def test_a_short_id_works_with_server_as_on_the_database(server: Server) -> None:
    run_id = await propose(server)
    shown_status, shown, err, _ = await cli(
        server, "approvals", "show", short_id(run_id), "--server", server.url, SIGNOFF_TOKEN=LEAD
    )
    assert shown_status == 0, err
    assert "PENDING_APPROVAL" in shown
    status, out, err, _ = await cli(
        server,
        "approvals",
        "approve",
        short_id(run_id)[:6],
        "--server",
        server.url,
        "--json",
        SIGNOFF_TOKEN=LEAD,
    )
    assert status == 0, err
    assert json.loads(out)["outcome"]["run_id"] == run_id


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--server", "http://approvals.example.com", "--token", "x"], "INSECURE_SERVER_URL"),
        (["--server", "ftp://127.0.0.1", "--token", "x"], "INVALID_ARGUMENT"),
        (["--server", "http://127.0.0.1:9", "--as", "lead-1", "--token", "x"], "INVALID_ARGUMENT"),
        (["--server", "http://127.0.0.1:9"], Code.UNAUTHENTICATED),
        (["--server", "http://127.0.0.1:9", "--token", "x"], "SERVER_UNREACHABLE"),
    ],
)
def test_the_cli_client_refuses_unsafe_or_incomplete_invocations_with_a_code(
    args: list[str], code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIGNOFF_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["approvals", "approve", "some-run", *args])
    assert result.exit_code != 0
    assert result.stderr.strip().endswith(f"[{code}]"), result.stderr


async def test_a_receipt_comes_from_the_server_and_verifies_with_the_public_key_alone(
    tmp_path: Path,
) -> None:
    made = CliRunner().invoke(app, ["audit", "keygen", "k1", "--dir", str(tmp_path)])
    ring = tmp_path / "ring.yaml"
    ring.write_text(f"signing_key: k1\nkeys:\n{made.stdout}")
    async with serving(tmp_path, SIGNOFF_AUDIT_KEYS=str(ring)) as server:
        run_id = await propose(server, action="pay_guarded")
        args = ("--server", server.url)
        status, _, err, _ = await cli(
            server, "approvals", "approve", run_id, *args, "--reason", "ok", SIGNOFF_TOKEN=LEAD
        )
        assert status == 0, err
        status, _, err, _ = await cli(
            server, "audit", "checkpoint", "--database", server.database, "--keys", str(ring)
        )
        assert status == 0, err
        receipt = tmp_path / "receipt.json"
        status, _, err, _ = await cli(
            server,
            "audit",
            "receipt",
            short_id(run_id),
            *args,
            "-o",
            str(receipt),
            SIGNOFF_TOKEN=LEAD,
        )
        assert status == 0, err
        status, out, err, _ = await cli(
            server, "audit", "verify-receipt", str(receipt), "--key", str(tmp_path / "k1.pub.pem")
        )
    assert status == 0, err
    assert out.startswith(f"receipt of run {run_id} holds: SUCCEEDED")


async def test_a_decision_on_another_version_exits_4_with_the_fresh_view_and_nothing_runs(
    server: Server,
) -> None:
    run_id = await propose(server)
    status, out, err, _ = await cli(
        server, "approvals", "show", run_id, "--server", server.url, "--json", SIGNOFF_TOKEN=LEAD
    )
    assert status == 0, err
    version = json.loads(out)["version"]
    status, out, err, _ = await cli(
        server,
        "approvals",
        "approve",
        run_id,
        "--version",
        str(version + 7),
        "--server",
        server.url,
        SIGNOFF_TOKEN=LEAD,
    )
    assert status == 4, err
    assert err.strip().endswith(f"[{Code.APPROVAL_RUN_CHANGED}]")
    assert f"version {version}" in err and "ACME Supplies" in out  # the fresh view
    status, out, err, _ = await cli(
        server, "approvals", "show", run_id, "--server", server.url, "--json", SIGNOFF_TOKEN=LEAD
    )
    still = json.loads(out)
    assert still["status"] == "PENDING_APPROVAL" and still["approval"]["decisions"] == []
    # Bound to the version it printed, the same approver's decision counts.
    status, out, err, _ = await cli(
        server,
        "approvals",
        "approve",
        run_id,
        "--version",
        str(version),
        "--server",
        server.url,
        SIGNOFF_TOKEN=LEAD,
    )
    assert status == 0, err
    assert f"[{Code.SUCCEEDED}]" in out
