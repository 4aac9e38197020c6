"""stdio: a real subprocess through ``mcp.Client``; identity only from the launch configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from typer.testing import CliRunner

from signoff import Code
from signoff.cli import app as cli
from tests.surfaces.support import check_output, tool_named

ROOT = Path(__file__).resolve().parents[2]
IDENTITY_VARS = ("SIGNOFF_PRINCIPAL", "SIGNOFF_TENANT", "SIGNOFF_ROLES")


def _env(**identity: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in IDENTITY_VARS}
    env["PYTHONPATH"] = str(ROOT)
    env.update(identity)
    return env


def _params(**identity: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.surfaces.stdio_server"],
        env=_env(**identity),
        cwd=str(ROOT),
    )


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_subprocess_serves_the_actions_as_the_launch_identity(mode: str) -> None:
    params = _params(SIGNOFF_PRINCIPAL="agent-1", SIGNOFF_TENANT="acme", SIGNOFF_ROLES="billing")
    async with Client(params, mode=mode) as client:
        listed = (await client.list_tools()).tools
        result = await client.call_tool(
            "invoice_cancel", {"invoice_id": "INV-1", "amount": 10, "idempotency_key": "k"}
        )
        invalid = await client.call_tool("invoice_cancel", {"idempotency_key": "k2"})
    assert {"invoice_cancel", "invoice_get", "signoff_get_run"} <= {t.name for t in listed}
    assert check_output(tool_named(listed, "invoice_cancel"), result)["code"] == Code.SUCCEEDED
    assert check_output(tool_named(listed, "invoice_cancel"), invalid)["code"] == (
        Code.INPUT_VALIDATION_FAILED
    )


async def test_the_stdio_tool_list_follows_the_launch_roles() -> None:
    params = _params(SIGNOFF_PRINCIPAL="agent-2", SIGNOFF_TENANT="acme", SIGNOFF_ROLES="support")
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        denied = await client.call_tool(
            "invoice_cancel", {"invoice_id": "INV-1", "amount": 10, "idempotency_key": "k"}
        )
    assert "invoice_cancel" not in names
    assert denied.structured_content is not None
    assert denied.structured_content["code"] == Code.POLICY_DENIED


def test_a_stdio_server_refuses_to_start_without_an_identity() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.surfaces.stdio_server"],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "principal" in done.stderr


@pytest.mark.parametrize(
    ("args", "env", "reason"),
    [
        (["serve"], {}, "no principal"),
        (["serve", "--principal", "a"], {}, "no tenant"),
        (["serve", "--transport", "http"], {}, "no token verification configured"),
        (
            ["serve", "--transport", "http", "--fixed-identity", "--host", "0.0.0.0"],
            {"SIGNOFF_PRINCIPAL": "a", "SIGNOFF_TENANT": "t"},
            "loopback",
        ),
        (["serve", "--transport", "http"], {"SIGNOFF_JWT_SECRET": "short"}, "at least 32 bytes"),
    ],
)
def test_signoff_serve_refuses_to_start_without_trusted_identity(
    args: list[str], env: dict[str, str], reason: str
) -> None:
    clean = {name: "" for name in (*IDENTITY_VARS, "SIGNOFF_JWT_SECRET", "SIGNOFF_JWT_JWKS")}
    result = CliRunner().invoke(cli, [*args, "--database", "memory://"], env={**clean, **env})
    assert result.exit_code == 2
    assert reason in result.output
