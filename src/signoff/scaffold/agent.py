"""Play the agent: call ``refund_issue`` over MCP as an AI host would, and follow the run.

    python agent.py ORDER_ID AMOUNT [REASON]

It launches ``signoff serve --transport stdio`` in this directory as the principal ``agent-1`` of
tenant ``acme`` with the role ``support`` - the launch configuration is the identity over stdio,
just as in an MCP host's settings - calls the tool, and when the refund waits for approval,
follows the run with ``signoff_get_run`` until somebody decides (at most ``AGENT_WAIT`` seconds,
default 600). Run it with the Python signoff is installed in.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

IDENTITY = {"SIGNOFF_PRINCIPAL": "agent-1", "SIGNOFF_TENANT": "acme", "SIGNOFF_ROLES": "support"}
FINAL = {"SUCCEEDED", "FAILED", "DENIED", "VALIDATION_FAILED", "CANCELLED"}


def server() -> StdioServerParameters:
    beside = Path(sys.executable).parent / "signoff"
    command = str(beside) if beside.exists() else shutil.which("signoff") or "signoff"
    return StdioServerParameters(
        command=command,
        args=["serve", "--transport", "stdio", "--log-level", "warning"],
        env={**os.environ, **IDENTITY},
        cwd=str(Path.cwd()),
    )


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's ``ActionOutcome``: decide on status, code and retry, never on the text."""
    result = await client.call_tool(tool, arguments)
    if not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{tool} returned no structured content")
    return result.structured_content


def show(label: str, outcome: dict[str, Any]) -> None:
    print(f"{label}: {outcome['status']} / {outcome['code']} (retry {outcome['retry']})")
    print(f"  run {outcome['run_id']}")
    if outcome.get("output") is not None:
        print(f"  output: {outcome['output']}")
    sys.stdout.flush()


async def main(order_id: str, amount: float, reason: str) -> None:
    request = {
        "order_id": order_id,
        "amount": amount,
        "reason": reason,
        # The same key on a retry never refunds twice: it answers the first run.
        "idempotency_key": f"refund-{order_id}-{amount:g}",
    }
    async with Client(server()) as client:
        outcome = await call(client, "refund_issue", request)
        show("refund_issue", outcome)
        if outcome.get("duplicate_of"):
            outcome = await call(client, "signoff_get_run", {"run_id": outcome["duplicate_of"]})
        deadline = time.monotonic() + float(os.environ.get("AGENT_WAIT", "600"))
        if outcome["status"] not in FINAL:
            print("Waiting for a finance lead to decide; in another terminal:")
            print(
                f"  signoff approvals approve {outcome['run_id']} --as lead-1 --tenant acme "
                "--roles finance-lead --reason 'checked the order'"
            )
            sys.stdout.flush()
        while outcome["status"] not in FINAL and (left := deadline - time.monotonic()) > 0:
            wait = {"run_id": outcome["run_id"], "wait_seconds": min(30.0, left)}
            outcome = await call(client, "signoff_get_run", wait)
        show("final", outcome)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), " ".join(sys.argv[3:])))
