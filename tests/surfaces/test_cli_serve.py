"""`signoff serve` and `signoff demo` as real processes, with the demo manifests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from signoff import Code, ExecutionStatus
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from tests.surfaces.support import DEADLINE, free_socket, http_client

STARTUP_DEADLINE = 90.0  # a hang guard for the whole start-up: imports, migrations, tokens

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["SIGNOFF_DEMO_INVOICES_DB"] = str(tmp_path / "invoices.db")
    env.update(extra)
    return env


async def test_signoff_serve_over_stdio_serves_the_demo_manifests_as_the_launch_identity(
    tmp_path: Path,
) -> None:
    params = StdioServerParameters(
        command=SIGNOFF,
        args=["serve", "--database", f"sqlite+aiosqlite:///{tmp_path}/signoff.db"],
        env=_env(
            tmp_path,
            SIGNOFF_PRINCIPAL="agent-1",
            SIGNOFF_TENANT="acme",
            SIGNOFF_ROLES="billing",
            SIGNOFF_MANIFESTS=str(DEMO_MANIFESTS),
        ),
        cwd=str(tmp_path),
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        read = await client.call_tool("invoice_get", {"invoice_id": "INV-1001"})
        pending = await client.call_tool(
            "invoice_cancel",
            {"invoice_id": "INV-1002", "amount": 4200.0, "idempotency_key": "k-1"},
        )
    assert {"invoice_list", "invoice_get", "invoice_cancel", "signoff_get_run"} <= names
    assert read.structured_content is not None
    assert read.structured_content["code"] == Code.SUCCEEDED
    assert pending.structured_content is not None
    assert pending.structured_content["status"] == ExecutionStatus.PENDING_APPROVAL


async def test_signoff_demo_prints_working_tokens_and_a_stdio_snippet_then_serves_http(
    tmp_path: Path,
) -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # the demo binds it itself; a race with another process is unlikely here
    state = tmp_path / "state"
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        "demo",
        "--port",
        str(port),
        "--manifests",
        str(DEMO_MANIFESTS),
        "--state-dir",
        str(state),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        lines: list[str] = []
        async with asyncio.timeout(STARTUP_DEADLINE):
            while not lines or not lines[-1].startswith("Ctrl-C"):
                line = await process.stdout.readline()
                assert line, "the demo exited early:\n" + "".join(lines)
                lines.append(line.decode())
        output = "".join(lines)
        agent_token = (state / "agent.token").read_text().strip()
        lead_token = (state / "approver.token").read_text().strip()
        assert agent_token in output and lead_token in output
        snippet = json.loads(output[output.index("{") : output.rindex("}") + 1])
        entry = snippet["mcpServers"]["signoff"]
        assert entry["args"][:3] == ["serve", "--transport", "stdio"]
        assert entry["env"]["SIGNOFF_PRINCIPAL"] == "demo-agent"
        assert (state / "jwt-secret").stat().st_mode & 0o077 == 0

        url = f"http://127.0.0.1:{port}"
        async with http_client(url, agent_token) as agent:
            names = {t.name for t in (await agent.list_tools()).tools}
            listed = await agent.call_tool("invoice_list", {"status": "open"})
        async with httpx2.AsyncClient(base_url=url) as http:
            lead_on_mcp = await http.post(
                "/mcp", json={}, headers={"Authorization": f"Bearer {lead_token}"}
            )
            lead_inbox = await http.get(
                "/api/approvals", headers={"Authorization": f"Bearer {lead_token}"}
            )
            agent_inbox = await http.get(
                "/api/approvals", headers={"Authorization": f"Bearer {agent_token}"}
            )
        assert "invoice_cancel" in names
        assert listed.structured_content is not None
        assert listed.structured_content["code"] == Code.SUCCEEDED
        # One token of each kind: the agent's proposes, the approver's decides, never crosswise.
        assert lead_on_mcp.status_code == 403
        assert 'error="insufficient_scope"' in lead_on_mcp.headers["www-authenticate"]
        assert lead_inbox.status_code == 200
        assert agent_inbox.status_code == 403
        assert agent_inbox.json()["code"] == Code.INSUFFICIENT_SCOPE
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), DEADLINE)


async def test_editing_the_manifests_while_serving_tells_the_client_the_tools_changed(
    tmp_path: Path,
) -> None:
    import mcp_types as types

    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "read.yaml").write_text((DEMO_MANIFESTS / "invoices-read.yaml").read_text())
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    params = StdioServerParameters(
        command=SIGNOFF,
        args=["serve", "--database", "memory://", "--manifests", str(manifests)],
        env=_env(
            tmp_path,
            SIGNOFF_PRINCIPAL="agent-1",
            SIGNOFF_TENANT="acme",
            SIGNOFF_ROLES="billing",
            PYTHONPATH=str(ROOT),
        ),
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        cancel = (DEMO_MANIFESTS / "invoice-cancel.yaml").read_text()
        (manifests / "cancel.yaml").write_text(cancel)
        await asyncio.wait_for(changed.wait(), DEADLINE)
        after = {t.name for t in (await client.list_tools()).tools}
    assert "invoice_cancel" not in before
    assert after - before == {"invoice_cancel"}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite+aiosqlite:///signoff.db", f"sqlite+aiosqlite:///{Path('signoff.db').resolve()}"),
        ("sqlite+aiosqlite:////abs/signoff.db", "sqlite+aiosqlite:////abs/signoff.db"),
        ("memory://", "memory://"),
        ("postgresql+asyncpg://db/signoff", "postgresql+asyncpg://db/signoff"),
    ],
)
def test_the_demo_names_its_sqlite_file_by_absolute_path_for_host_snippets(
    url: str, expected: str
) -> None:
    from signoff.cli.demo import absolute_sqlite

    assert absolute_sqlite(url) == expected
