"""What governance costs per MCP tool call: a governed no-op vs a plain ``MCPServer`` no-op tool.

Both run in one process and one event loop, interleaved in rounds so drift hits them equally:

- plain:    ``MCPServer`` with one ``@tool`` returning ``{}``;
- governed: signoff's MCP surface over a ``Runtime`` — a read-only action with no approval and an
  async executor returning ``{}``, so every call creates a run, resolves, validates, evaluates
  policy, dispatches and records the result with its audit events (two store commits).

Transports: the in-memory ``mcp.Client`` and streamable HTTP (uvicorn on loopback; the governed
server verifies an HS256 bearer JWT on every request, the plain one has no auth). Stores: the
in-memory store and embedded SQLite (a temporary file).

    .venv/bin/python benchmarks/mcp_overhead.py [--calls 2000] [--rounds 10]

Prints a table and writes it to ``benchmarks/MCP_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.surfaces.support import free_socket  # noqa: E402

from signoff import ActionDefinition, ApprovalSpec, ExecutionContext  # noqa: E402
from signoff.core.registry import ActionRegistry  # noqa: E402
from signoff.core.runtime import Runtime  # noqa: E402
from signoff.store.factory import MEMORY_URL, open_store  # noqa: E402
from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier, issue_token  # noqa: E402
from signoff.surfaces.mcp import SignoffMCP, fixed_identity, make_caller  # noqa: E402
from signoff.surfaces.mcp.http import BearerAuth, build_http_app  # noqa: E402
from signoff.surfaces.mcp.serving import uvicorn_server  # noqa: E402

SECRET = "benchmark-secret-benchmark-secret-benchmark"
RESULTS = ROOT / "benchmarks" / "MCP_RESULTS.md"
NOTES = "## Notes"  # everything from this heading on survives a re-run


async def noop_executor(context: ExecutionContext) -> dict[str, Any]:
    return {}


NOOP = ActionDefinition(
    id="bench.noop",
    title="No-op",
    description="Does nothing.",
    effect="read_only",
    risk="low",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    approval=ApprovalSpec(when="false"),
    executor=noop_executor,
)


def plain_server() -> MCPServer:
    server = MCPServer("plain", log_level="WARNING")

    @server.tool()
    async def noop() -> dict[str, Any]:
        """Does nothing."""
        return {}

    return server


@dataclass
class Case:
    name: str
    transport: str
    store: str
    connect: Callable[[AsyncExitStack], Awaitable[Client]]
    tool: str
    samples: list[float] = field(default_factory=list)
    client: Client | None = None


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    sock = free_socket()
    port = sock.getsockname()[1]
    server = uvicorn_server(app, "127.0.0.1", port, log_level="warning")
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def http_connect(stack: AsyncExitStack, url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
    return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))


def in_memory(surface: SignoffMCP) -> Callable[[AsyncExitStack], Awaitable[Client]]:
    return lambda stack: stack.enter_async_context(Client(surface.server))


def over_http(url: str, token: str) -> Callable[[AsyncExitStack], Awaitable[Client]]:
    return lambda stack: http_connect(stack, url, token)


async def governed_runtime(stack: AsyncExitStack, url: str) -> Runtime:
    store = await open_store(url)
    stack.push_async_callback(store.close)
    return Runtime(ActionRegistry([NOOP]), store)


async def build_cases(stack: AsyncExitStack, sqlite_url: str) -> list[Case]:
    caller = make_caller("bench-agent", "bench", "")
    token = issue_token(
        SECRET, "bench-agent", "bench", [], ttl_seconds=3600, scopes=["signoff:propose"]
    )
    plain = plain_server()
    plain_url = await stack.enter_async_context(served(plain.streamable_http_app()))
    cases = [
        Case(
            "plain MCPServer",
            "in-memory",
            "-",
            lambda s: s.enter_async_context(Client(plain)),
            "noop",
        ),
        Case(
            "plain MCPServer",
            "HTTP",
            "-",
            lambda s: http_connect(s, plain_url, None),
            "noop",
        ),
    ]
    for label, url in (("memory", MEMORY_URL), ("SQLite", sqlite_url)):
        runtime = await governed_runtime(stack, url)
        surface = SignoffMCP(runtime, fixed_identity(caller))
        app = build_http_app(
            runtime, BearerAuth(JwtVerifier(JwtConfig(secret=SECRET)), "http://127.0.0.1")
        )
        governed_url = await stack.enter_async_context(served(app))
        cases.append(Case("signoff governed", "in-memory", label, in_memory(surface), "bench_noop"))
        cases.append(
            Case("signoff governed", "HTTP", label, over_http(governed_url, token), "bench_noop")
        )
    return cases


async def measure(case: Case, calls: int) -> None:
    assert case.client is not None
    call = case.client.call_tool
    for _ in range(calls):
        started = time.perf_counter()
        result = await call(case.tool, {})
        case.samples.append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(f"{case.name}: {result.content}")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def targets(cases: list[Case]) -> str:
    """The targets: HTTP on SQLite <= 1.5x plain and on the memory store <= 1.2x (issue 18),
    in-memory <= 4x plain (medians)."""
    medians = {(c.transport, c.store): statistics.median(c.samples) for c in cases}
    checks = [
        ("HTTP, SQLite", medians[("HTTP", "SQLite")] / medians[("HTTP", "-")], 1.5),
        ("HTTP, memory", medians[("HTTP", "memory")] / medians[("HTTP", "-")], 1.2),
        ("in-memory, memory", medians[("in-memory", "memory")] / medians[("in-memory", "-")], 4),
        ("in-memory, SQLite", medians[("in-memory", "SQLite")] / medians[("in-memory", "-")], 4),
    ]
    return "\n".join(
        f"- {name}: {ratio:.2f}x (target <= {limit}x) {'met' if ratio <= limit else 'NOT met'}"
        for name, ratio, limit in checks
    )


def table(cases: list[Case]) -> str:
    baseline = {c.transport: statistics.median(c.samples) for c in cases if c.store == "-"}
    lines = [
        "| server | transport | store | median (ms) | p99 (ms) | calls/s | median vs plain |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for case in cases:
        median = statistics.median(case.samples)
        lines.append(
            f"| {case.name} | {case.transport} | {case.store} | {median * 1e3:.3f} | "
            f"{percentile(case.samples, 0.99) * 1e3:.3f} | {1 / median:,.0f} | "
            f"{median / baseline[case.transport]:.2f}x |"
        )
    return "\n".join(lines)


async def main(calls: int, rounds: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        async with AsyncExitStack() as stack:
            cases = await build_cases(stack, sqlite_url)
            for case in cases:
                case.client = await case.connect(stack)
                await case.client.list_tools()  # the client validates outputs against these
                await measure(case, 50)  # warm-up
                case.samples.clear()
            per_round = max(1, calls // rounds)
            for _ in range(rounds):
                for case in cases:
                    gc.collect()
                    await measure(case, per_round)
            return table(cases) + "\n\n" + targets(cases)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per case")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--no-save", action="store_true", help="do not write MCP_RESULTS.md")
    args = parser.parse_args()
    rendered = asyncio.run(main(args.calls, args.rounds))
    print(rendered)
    if not args.no_save:
        machine = f"Python {platform.python_version()}, {platform.machine()}, {platform.system()}"
        previous = RESULTS.read_text() if RESULTS.exists() else ""
        notes = previous[previous.index(NOTES) :] if NOTES in previous else ""
        RESULTS.write_text(
            "# MCP overhead: governed no-op vs plain MCPServer tool\n\n"
            f"`benchmarks/mcp_overhead.py --calls {args.calls} --rounds {args.rounds}` "
            f"({machine}).\n\n{rendered}\n" + (f"\n{notes}" if notes else "")
        )
