"""One full exchange of the MCP tasks extension, captured from a real server: the demo's
``invoice_cancel`` over streamable HTTP at protocol 2026-07-28, by a client that declares the
extension, through approval to the completed task.

docs/mcp.md shows it between ``<!-- tasks-wire:start -->`` and ``<!-- tasks-wire:end -->``;
``tests/docs/test_mcp_wire.py`` captures it again and fails when the page differs (``make
docs-tables`` rewrites it). Run ids become ``00000000-0000-7000-8000-00000000000N`` in order of
appearance and a task id's HMAC becomes ``HMAC``; times come from a fixed clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import httpx2

from signoff.app import load_registry
from signoff.core.clock import ManualClock
from signoff.core.run import ApprovalVote
from signoff.core.runtime import DecisionRequest, Runtime
from signoff.demo import MANIFESTS
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.mcp.tasks import EXTENSION
from tests.helpers import LEAD
from tests.surfaces.rawrpc import MODERN, reply_of
from tests.surfaces.support import running

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TASK_MAC = re.compile(r"(00000000-0000-7000-8000-0000000000\d\d)\.[A-Za-z0-9_-]+")
ARGUMENTS = {
    "invoice_id": "INV-1002",
    "amount": 4200.0,
    "reason": "duplicate invoice",
    "idempotency_key": "cancel-INV-1002",
}
# The headers worth showing (the client library adds the rest).
SHOWN = ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name")


def _meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "my-agent", "version": "1.0"},
    }


async def _exchange() -> list[tuple[dict[str, str], dict[str, Any], dict[str, Any]]]:
    """(headers, request, reply) for: the call, a tasks/get while waiting, and one after."""
    runtime = Runtime(load_registry(MANIFESTS), InMemoryStore(), clock=ManualClock())
    caller = make_caller("agent-1", "demo", "billing")
    app = build_http_app(
        runtime, FixedIdentity(caller, "127.0.0.1"), HttpOptions(task_secret=b"x" * 32)
    )
    seen: list[tuple[dict[str, str], dict[str, Any], dict[str, Any]]] = []
    async with running(app) as url, httpx2.AsyncClient(timeout=30) as http:

        async def post(method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
            request = {
                "jsonrpc": "2.0",
                "id": len(seen) + 1,
                "method": method,
                "params": {**params, "_meta": _meta()},
            }
            headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": method,
                "Mcp-Name": name,
            }
            reply = reply_of(await http.post(f"{url}/mcp", json=request, headers=headers))
            seen.append(({k: headers[k] for k in SHOWN}, request, reply))
            return reply

        created = await post(
            "tools/call", {"name": "invoice_cancel", "arguments": ARGUMENTS}, "invoice_cancel"
        )
        task_id = created["result"]["taskId"]
        await post("tasks/get", {"taskId": task_id}, task_id)
        decided = await runtime.decide(
            task_id.rpartition(".")[0],
            "demo",
            DecisionRequest(approver=LEAD, vote=ApprovalVote.APPROVE, reason="checked"),
        )
        assert decided.accepted, decided
        await post("tasks/get", {"taskId": task_id}, task_id)
        await runtime.drain()
    return seen


def capture() -> str:
    """The exchange as the page shows it (markdown, stable from run to run)."""
    with tempfile.TemporaryDirectory() as scratch:
        previous = os.environ.get("SIGNOFF_DEMO_INVOICES_DB")
        os.environ["SIGNOFF_DEMO_INVOICES_DB"] = str(Path(scratch) / "invoices.db")
        try:
            seen = asyncio.run(_exchange())
        finally:
            if previous is None:
                os.environ.pop("SIGNOFF_DEMO_INVOICES_DB", None)
            else:
                os.environ["SIGNOFF_DEMO_INVOICES_DB"] = previous
    titles = (
        "The agent calls the tool, declaring the extension; the call needs approval, so it "
        "answers a task",
        "While the run waits, `tasks/get` says `working`",
        "A billing lead approves (in the inbox, the API or the CLI); the run executes and the "
        "task is `completed` with the tool's result",
    )
    names: dict[str, str] = {}

    def stable(text: str) -> str:
        text = UUID.sub(lambda m: names.setdefault(m.group(), _fake(len(names) + 1)), text)
        return TASK_MAC.sub(r"\1.HMAC", text)

    out = []
    for title, (headers, request, reply) in zip(titles, seen, strict=True):
        lines = "\n".join(f"{k}: {v}" for k, v in headers.items())
        out += [
            f"**{title}.**",
            "",
            "```http",
            f"POST /mcp\n{stable(lines)}",
            "```",
            "",
            "```json",
            stable(json.dumps(request, indent=2)),
            "```",
            "",
            "```json",
            stable(json.dumps(reply, indent=2)),
            "```",
            "",
        ]
    return "\n".join(out)


def _fake(n: int) -> str:
    return f"00000000-0000-7000-8000-{n:012d}"
