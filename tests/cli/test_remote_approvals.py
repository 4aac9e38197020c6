"""`signoff approvals ... --server/--token`: a client of a real server process, which executes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff import Code
from signoff.cli import app
from signoff.surfaces.mcp.auth import issue_token
from signoff.surfaces.scopes import DEFAULT_APPROVE, DEFAULT_PROPOSE
from tests.surfaces.support import DEADLINE, free_socket, http_client

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")
SECRET = "a-test-secret-that-is-long-enough-for-hs256"
MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: pay.send, title: Send a payment, description: Pay someone.}
spec:
  effect: financial
  risk: high
  input:
    type: object
    properties: {to: {type: string}, amount: {type: number}}
    required: [to, amount]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [payer]}
  approval:
    when: "true"
    approvers: {roles: [payer-lead], count: 1}
    expires_after: 1h
  executor: {mode: sync, python: "tests.cli.pid_hooks:send"}
"""

pytestmark = pytest.mark.slow


@dataclass
class Server:
    url: str
    pid: int
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        env.update(extra)
        return env


def _token(sub: str, roles: list[str], scope: str) -> str:
    return issue_token(SECRET, sub, "acme", roles, scopes=[scope])


AGENT = _token("agent-1", ["payer", "payer-lead"], DEFAULT_PROPOSE)
LEAD = _token("lead-1", ["payer-lead"], DEFAULT_APPROVE)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "pay.yaml").write_text(MANIFEST)
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(SIGNOFF_JWT_SECRET=SECRET, PYTHONPATH=str(ROOT))
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--database",
        f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}",
        "--manifests",
        str(manifests),
        "--no-reload",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        lines: list[str] = []
        while not any("Uvicorn running" in line for line in lines):
            line = await asyncio.wait_for(process.stderr.readline(), DEADLINE)
            assert line, "the server exited early:\n" + "".join(lines)
            lines.append(line.decode())
        yield Server(f"http://127.0.0.1:{port}", process.pid, tmp_path)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), DEADLINE)


async def cli(server: Server, *args: str, **env: str) -> tuple[int, str, str, int]:
    """Run ``signoff`` as its own process: exit status, stdout, stderr and its pid."""
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        *args,
        cwd=server.tmp,
        env=server.env(**env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), DEADLINE * 3)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode(), process.pid


async def propose(server: Server) -> str:
    async with http_client(server.url, AGENT) as agent:
        tools = (await agent.list_tools()).tools
        name = next(t.name for t in tools if t.name in ("pay.send", "pay_send"))
        result = await agent.call_tool(
            name, {"to": "ACME Supplies", "amount": 900, "idempotency_key": "p-1"}
        )
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
