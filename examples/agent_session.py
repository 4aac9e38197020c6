"""An agent's whole session with signoff over streamable HTTP, using the public ``mcp.Client``.

Start the demo first (``make demo``), then in another terminal::

    .venv/bin/python examples/agent_session.py

It lists its tools, reads the open invoices, asks to cancel a large one (that needs a billing
lead's approval), then follows the run with ``signoff_get_run`` until somebody decides — approve
it in the approvals inbox (http://127.0.0.1:8000/approvals) with the approver token the demo
printed, or with ``SIGNOFF_TOKEN=$(cat .signoff-demo/approver.token) signoff approvals approve
RUN_ID --server http://127.0.0.1:8000``.

Environment: SIGNOFF_URL (default http://127.0.0.1:8000/mcp), SIGNOFF_TOKEN (default: the agent
token the demo wrote to .signoff-demo/agent.token), SIGNOFF_WAIT (seconds to follow the run,
default 600).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = os.environ.get("SIGNOFF_URL", "http://127.0.0.1:8000/mcp")
TOKEN_FILE = Path(".signoff-demo/agent.token")
# The signoff command of the environment running this script, by path: it need not be on PATH.
_BESIDE = Path(sys.executable).parent / "signoff"
SIGNOFF = shlex.quote(str(_BESIDE)) if _BESIDE.exists() else "signoff"
FINAL = {"SUCCEEDED", "FAILED", "DENIED", "VALIDATION_FAILED", "CANCELLED"}


def token() -> str:
    value = os.environ.get("SIGNOFF_TOKEN") or (
        TOKEN_FILE.read_text().strip() if TOKEN_FILE.exists() else ""
    )
    if not value:
        sys.exit("No token: run `make demo` first, or set SIGNOFF_TOKEN.")
    return value


def show(label: str, outcome: dict[str, Any]) -> None:
    print(f"\n{label}: {outcome['status']} / {outcome['code']} (retry: {outcome['retry']})")
    if outcome.get("message"):
        print(f"  {outcome['message']}")
    if outcome.get("output") is not None:
        print("  output:", json.dumps(outcome["output"], indent=2).replace("\n", "\n  "))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool and return the ``ActionOutcome`` (decide on status/code/retry, not text)."""
    result = await client.call_tool(tool, arguments)
    if not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{tool} returned no structured content")
    return result.structured_content


async def main() -> None:
    headers = {"Authorization": f"Bearer {token()}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        Client(streamable_http_client(URL, http_client=http)) as client,
    ):
        # 1. What may I do? Only the actions my roles may propose, plus signoff's run tools.
        tools = (await client.list_tools()).tools
        print(f"Connected to {URL}. My tools:")
        for tool in tools:
            hints = tool.annotations
            kind = "read-only" if hints and hints.read_only_hint else "changes things"
            print(f"  - {tool.name:24} {kind:15} {tool.title or ''}")

        # 2. A read: governed too (a run, a policy check, an audit entry), but no approval.
        listed = await call(client, "invoice_list", {"status": "open"})
        show("invoice_list", listed)

        # 3. A write above 1000 EUR: policy says a billing lead must approve it first.
        key = f"cancel-INV-1002-{date.today().isoformat()}"
        request = {
            "invoice_id": "INV-1002",
            "amount": 4200.0,
            "reason": "Duplicate of INV-1001.",
            "idempotency_key": key,
        }
        outcome = await call(client, "invoice_cancel", request)
        show("invoice_cancel", outcome)
        if outcome.get("duplicate_of"):
            # This key was used before (an earlier session): follow the original run instead.
            outcome = await call(client, "signoff_get_run", {"run_id": outcome["duplicate_of"]})
            show("the original run", outcome)
        run_id = outcome["run_id"]

        # Retrying with the same key never cancels twice: it points at the original run.
        again = await call(client, "invoice_cancel", request)
        print(f"\nSame request again -> {again['code']}, duplicate_of={again.get('duplicate_of')}")

        # 4. Follow the run until somebody decides. get_run waits for a change (up to 30 s).
        if outcome["status"] not in FINAL:
            print(f"\nWaiting for a billing lead to approve run {run_id}:")
            inbox = URL.removesuffix("/mcp") + "/approvals"
            print(f"  web inbox: {inbox} (sign in with the approver token)")
            lead = shlex.quote(str(TOKEN_FILE.with_name("approver.token").resolve()))
            print(
                f"  CLI:       SIGNOFF_TOKEN=$(cat {lead}) {SIGNOFF} approvals approve "
                f"{run_id[-12:]} --server {URL.removesuffix('/mcp')} --reason duplicate"
            )
        deadline = time.monotonic() + float(os.environ.get("SIGNOFF_WAIT", "600"))
        while outcome["status"] not in FINAL and (left := deadline - time.monotonic()) > 0:
            wait = {"run_id": run_id, "wait_seconds": min(30.0, left)}
            outcome = await call(client, "signoff_get_run", wait)
            print(f"  ... {outcome['status']} / {outcome['code']}")

        # 5. The outcome, as the model would read it.
        show("final", outcome)


def unreachable(exc: BaseException) -> BaseException | None:
    """The connection failure inside ``exc`` (the client's task groups wrap it), if any."""
    if isinstance(exc, httpx2.TransportError | OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = unreachable(inner)
            if found is not None:
                return found
    return unreachable(exc.__cause__) if exc.__cause__ is not None else None


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException as exc:
        cause = unreachable(exc)
        if cause is None:
            raise
        reason = str(cause) or type(cause).__name__
        sys.exit(
            f"Cannot reach signoff at {URL} ({reason}): start it with `make demo` or set SIGNOFF_URL."
        )
