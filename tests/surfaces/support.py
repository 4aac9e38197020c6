"""Shared pieces for the MCP surface tests: definitions, servers, clients, schema checks."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import jsonschema_rs
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from signoff import ActionDefinition, ExecutionContext
from signoff.core.definition import IdempotencySpec, PolicySpec
from signoff.core.ports import AuditEvent, Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.mcp import SignoffMCP, fixed_identity, make_caller
from signoff.surfaces.mcp.serving import uvicorn_server
from tests.helpers import NO_APPROVAL, Recorder, definition

SECRET = "a-test-secret-that-is-long-enough-for-hs256"
# A hang guard, never a timing claim: a correct test finishes long before it, even with the
# machine busy (a server process takes seconds just to import its libraries under load).
DEADLINE = 30.0

LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"invoice_id": {"type": "string"}},
    "required": ["invoice_id"],
    "additionalProperties": False,
}


def lookup_definition(executor: Any, **overrides: Any) -> ActionDefinition:
    """A read-only action anyone may call, no key, no approval."""
    fields: dict[str, Any] = {
        "id": "invoice.get",
        "title": "Get an invoice",
        "description": "Read one invoice.",
        "effect": "read_only",
        "risk": "low",
        "input_schema": LOOKUP_SCHEMA,
        "resource": None,
        "idempotency": IdempotencySpec(),
        "policy": PolicySpec(roles=None),
        "approval": NO_APPROVAL,
        "executor": executor,
    }
    fields.update(overrides)
    return ActionDefinition(**fields)


@dataclass
class Gate:
    """A synchronous executor that blocks until released: a call that is "in the middle"."""

    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    calls: list[ExecutionContext] = field(default_factory=list)

    def __call__(self, context: ExecutionContext) -> dict[str, Any]:
        self.calls.append(context)
        self.started.set()
        if not self.release.wait(DEADLINE):
            raise TimeoutError("the test never released the gate")
        return {"released": True}

    async def wait_started(self) -> None:
        if not await asyncio.to_thread(self.started.wait, DEADLINE):
            raise TimeoutError("the executor never started")


@dataclass
class World:
    """A runtime with the invoice actions, and an MCP surface per caller."""

    recorder: Recorder
    runtime: Runtime
    registry: ActionRegistry
    store: Store

    def surface(
        self, principal: str = "agent-1", tenant: str = "acme", roles: str = "billing"
    ) -> SignoffMCP:
        return SignoffMCP(self.runtime, fixed_identity(make_caller(principal, tenant, roles)))

    def client(self, **identity: str) -> Client:
        return Client(self.surface(**identity).server)

    async def audit(self, run_id: str) -> list[AuditEvent]:
        async with self.store.unit() as unit:
            return await unit.audit.list_for_run(run_id)


def world(*extra: ActionDefinition, store: Store | None = None) -> World:
    recorder = Recorder()
    registry = ActionRegistry([definition(recorder), lookup_definition(recorder), *extra])
    store = store if store is not None else InMemoryStore()
    return World(recorder, Runtime(registry, store), registry, store)


def check_output(tool: types.Tool, result: types.CallToolResult) -> dict[str, Any]:
    """The result's structured content, validated against the tool's advertised output schema."""
    assert tool.output_schema is not None
    assert isinstance(result.structured_content, dict)
    jsonschema_rs.Draft202012Validator(tool.output_schema).validate(result.structured_content)
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    import json

    assert json.loads(block.text) == result.structured_content
    return result.structured_content


def free_socket() -> socket.socket:
    """A listening loopback socket: clients may connect before the server starts accepting."""
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@asynccontextmanager
async def running(app: Starlette, sock: socket.socket | None = None) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn in a background task (on ``sock`` when given, so a caller can
    know the URL before building the app); yields the base URL."""
    sock = sock or free_socket()
    port = sock.getsockname()[1]
    server = uvicorn_server(app, "127.0.0.1", port, log_level="warning")
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, DEADLINE)
        sock.close()


@asynccontextmanager
async def http_client(url: str, token: str | None, *, mode: str = "auto") -> AsyncIterator[Client]:
    """An ``mcp.Client`` over streamable HTTP sending ``token`` as the bearer credential."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(30.0, read=60.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url + "/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


def tool_named(listed: Sequence[types.Tool], name: str) -> types.Tool:
    return next(tool for tool in listed if tool.name == name)


FINAL_STATUSES = {"SUCCEEDED", "FAILED", "DENIED", "VALIDATION_FAILED", "CANCELLED"}


async def until_final(client: Client, run_id: str) -> dict[str, Any]:
    """Follow a run with ``signoff.get_run`` (each call waits for a change) to a final status."""
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while True:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise TimeoutError(f"run {run_id} did not finish")
        result = await client.call_tool("signoff_get_run", {"run_id": run_id, "wait_seconds": left})
        outcome = result.structured_content
        assert isinstance(outcome, dict)
        if outcome["status"] in FINAL_STATUSES:
            return outcome
