"""`signoff demo` is `signoff serve` with demo settings, and every command it prints runs as
printed: a real demo process, its printed lines parsed and executed (the agent's story, the
approver's list and approve, the Claude Code header, the stdio snippet), then SIGTERM exits 0."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from signoff import Code
from tests.surfaces.support import DEADLINE, free_socket, http_client

SIGNOFF = str(Path(sys.executable).parent / "signoff")
STARTUP_DEADLINE = 90.0  # a hang guard for the whole start-up: imports, migrations, tokens

pytestmark = pytest.mark.slow


@dataclass
class Demo:
    url: str
    printed: list[str]
    process: asyncio.subprocess.Process
    env: dict[str, str]
    cwd: Path

    def command(self, contains: str) -> str:
        """The one printed command line holding ``contains``, as a shell would read it."""
        (line,) = [line.strip() for line in self.printed if contains in line]
        return line


@asynccontextmanager
async def running_demo(tmp_path: Path) -> AsyncIterator[Demo]:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # the demo binds it itself; a race with another process is unlikely here
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["SIGNOFF_DEMO_INVOICES_DB"] = str(tmp_path / "invoices.db")
    # Printed commands run from elsewhere than the demo's directory, as a user's second terminal.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        "demo",
        "--port",
        str(port),
        "--state-dir",
        str(tmp_path / "state"),
        cwd=tmp_path,
        env=env,
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
        yield Demo(f"http://127.0.0.1:{port}", lines, process, env, elsewhere)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def shell(demo: Demo, line: str) -> tuple[int, str]:
    """Run a printed line with ``sh`` (it uses ``$(cat ...)``), from another directory."""
    done = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        line,
        cwd=demo.cwd,
        env=demo.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(done.communicate(), DEADLINE * 2)
    assert done.returncode is not None
    return done.returncode, out.decode()


async def test_the_demo_answers_the_operator_endpoints_and_exits_0_on_sigterm(
    tmp_path: Path,
) -> None:
    async with running_demo(tmp_path) as demo:
        async with httpx2.AsyncClient(base_url=demo.url, timeout=DEADLINE) as http:
            health = await http.get("/healthz")
            ready = await http.get("/readyz")
            metrics = await http.get("/metrics")
            landing = await http.get("/")
        assert health.status_code == ready.status_code == landing.status_code == 200
        assert ready.json()["status"] == "ready"
        assert metrics.status_code == 200 and "signoff_" in metrics.text
        assert "/approvals" in landing.text
        demo.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(demo.process.wait(), DEADLINE) == 0


async def test_sigterm_as_soon_as_the_instructions_are_printed_is_a_graceful_stop(
    tmp_path: Path,
) -> None:
    async with running_demo(tmp_path) as demo:
        # The instructions come once the server handles signals: no window where SIGTERM kills.
        demo.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(demo.process.wait(), DEADLINE) == 0


async def test_every_command_the_demo_prints_runs_as_printed(tmp_path: Path) -> None:
    async with running_demo(tmp_path) as demo:
        # The agent's whole story, as printed: it proposes a cancel that waits for approval.
        story = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            demo.command("agent_session"),
            cwd=demo.cwd,
            env={**demo.env, "SIGNOFF_WAIT": str(DEADLINE)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert story.stdout is not None
        told: list[str] = []
        async with asyncio.timeout(DEADLINE * 2):
            while not any("Waiting for a billing lead" in line for line in told):
                line = await story.stdout.readline()
                assert line, "the agent stopped early:\n" + "".join(told)
                told.append(line.decode())
        (run_id,) = re.findall(r"approve run ([0-9a-f-]{36})", "".join(told))

        listed_status, listed = await shell(demo, demo.command("approvals list"))
        approve = demo.command("approvals approve RUN_ID").replace("RUN_ID", run_id[-12:])
        approved_status, approved = await shell(demo, approve)
        rest, _ = await asyncio.wait_for(story.communicate(), DEADLINE * 2)
        assert listed_status == 0, listed
        assert run_id[-12:] in listed
        assert approved_status == 0, approved
        assert story.returncode == 0, "".join(told) + rest.decode()
        assert "final: SUCCEEDED" in rest.decode()

        # The printed mint line makes a token this demo accepts, for the roles it names.
        minted_status, minted = await shell(demo, demo.command("token mint"))
        assert minted_status == 0, minted
        async with httpx2.AsyncClient(base_url=demo.url, timeout=DEADLINE) as http:
            as_admin = await http.get(
                "/api/approvals", headers={"Authorization": f"Bearer {minted.strip()}"}
            )
        assert as_admin.status_code == 200, as_admin.text

        # Claude Code's line carries a working agent header for the printed URL.
        words = shlex.split(demo.command("claude mcp add"))
        url, header = words[words.index("signoff") + 1], words[words.index("--header") + 1]
        assert url == f"{demo.url}/mcp"
        async with http_client(demo.url, header.removeprefix("Authorization: Bearer ")) as agent:
            listed_tools = await agent.call_tool("invoice_list", {"status": "open"})
        assert listed_tools.structured_content is not None
        assert listed_tools.structured_content["code"] == Code.SUCCEEDED

        # The stdio snippet launches a server that reads the same invoices.
        output = "".join(demo.printed)
        entry = json.loads(output[output.index("{") : output.rindex("}") + 1])["mcpServers"][
            "signoff"
        ]
        params = StdioServerParameters(
            command=entry["command"],
            args=entry["args"],
            env={**demo.env, **entry["env"]},
            cwd=str(demo.cwd),
        )
        async with Client(params) as client:
            read = await client.call_tool("invoice_get", {"invoice_id": "INV-1002"})
        assert read.structured_content is not None
        assert read.structured_content["code"] == Code.SUCCEEDED
        assert read.structured_content["output"]["invoice"]["status"] == "cancelled"
