"""One tool call over streamable HTTP: signoff against a plain ``MCPServer`` and a FastMCP peer.

Every server is its own subprocess on loopback; one client process (the official ``mcp`` v2
``Client`` over ``streamable_http_client``) calls each in turn, interleaved in rounds so drift
hits all alike, one call at a time:

- plain: an ``MCPServer`` (``mcp`` v2) with one ``noop`` tool returning ``{}``; no auth, no writes;
- FastMCP peer: FastMCP (``fastmcp`` 4.1.6 from PyPI, in its own environment
  ``benchmarks/.peer-venv``, made on first use — the script says what it installs) with a
  middleware that, per call, validates the arguments with ``jsonschema`` (Draft 2020-12, compiled
  once), evaluates a CEL policy (``common-expression-language``, compiled once) and makes two
  durable audit commits (stdlib ``sqlite3``, WAL, ``synchronous=FULL``: one before the tool, one
  after). No run state, idempotency, approvals or auth;
- signoff, SQLite: ``signoff serve --transport http`` on a SQLite file (WAL, ``synchronous=FULL``)
  with one read-only no-op action (JSON Schema input, role policy); every request carries an
  HS256 bearer JWT that the server verifies; each call is a governed run with two durable commits;
- signoff, memory: the same on the in-memory store (``memory://``).

    .venv/bin/python benchmarks/http_peers.py [--calls 1000] [--rounds 5]

Targets (issue 18): signoff on SQLite <= 1.5x the plain tool's median latency, on the memory store
<= 1.2x, and no slower than the FastMCP peer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PEER_VENV = ROOT / "benchmarks" / ".peer-venv"
PEER_PACKAGES = ["fastmcp==4.1.6", "jsonschema>=4.22,<5", "common-expression-language==0.10.0"]
SECRET = "benchmark-secret-benchmark-secret-benchmark"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"note": {"type": "string", "maxLength": 100}},
    "additionalProperties": False,
}
POLICY = '"bench" in principal.roles && size(input) <= 1'

MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata:
  id: bench.noop
  title: No-op
  description: Does nothing.
spec:
  effect: read_only
  risk: low
  input: {type: object, properties: {note: {type: string, maxLength: 100}},
          additionalProperties: false}
  policy: {roles: [bench]}
  executor:
    python: benchmarks.hooks:noop
"""


# ------------------------------------------------------------------------------ servers
def serve_plain(port: int) -> None:
    from mcp.server import MCPServer

    server = MCPServer("plain", log_level="WARNING")

    @server.tool()
    async def noop(note: str | None = None) -> dict[str, Any]:
        """Does nothing."""
        return {}

    server.run("streamable-http", host="127.0.0.1", port=port)


def serve_fastmcp(port: int, database: str) -> None:
    """Runs inside ``.peer-venv``: FastMCP with a governing middleware."""
    import json
    import sqlite3
    from datetime import UTC, datetime

    import cel
    import jsonschema
    from fastmcp import FastMCP  # type: ignore[import-not-found]
    from fastmcp.server.middleware import Middleware  # type: ignore[import-not-found]

    db = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT, "
        "tool TEXT, kind TEXT, data TEXT)"
    )
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    policy = cel.compile(POLICY)

    def audit(tool: str, kind: str, data: dict[str, Any]) -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO audit (at, tool, kind, data) VALUES (?,?,?,?)",
            (datetime.now(UTC).isoformat(), tool, kind, json.dumps(data)),
        )
        db.execute("COMMIT")

    class Governing(Middleware):  # type: ignore[misc]
        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            name = context.message.name
            arguments = context.message.arguments or {}
            errors = [e.message for e in validator.iter_errors(arguments)]
            if errors:
                raise ValueError(f"invalid input: {errors}")
            if not policy.execute({"principal": {"roles": ["bench"]}, "input": arguments}):
                raise PermissionError("denied by policy")
            audit(name, "allowed", {"input": arguments})
            result = await call_next(context)
            audit(name, "executed", {"ok": True})
            return result

    server = FastMCP("fastmcp-peer")
    server.add_middleware(Governing())

    @server.tool()  # type: ignore[untyped-decorator]
    async def noop(note: str | None = None) -> dict[str, Any]:
        """Does nothing."""
        return {}

    server.run(
        transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning"
    )


# ---------------------------------------------------------------------------- the bench
def ensure_peer_venv() -> Path:
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / ".installed"
    wanted = " ".join(PEER_PACKAGES)
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"Installing into {PEER_VENV} (git-ignored) from PyPI: {wanted}", flush=True)
    venv.create(PEER_VENV, with_pip=True, clear=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    stamp.write_text(wanted)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(args: list[str], env: dict[str, str] | None = None) -> Iterator[None]:
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_listening(port: int) -> None:
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"nothing listens on {port}")


def signoff_server(tmp: Path, port: int, database: str) -> list[str]:
    manifests = tmp / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "noop.yaml").write_text(MANIFEST)
    return [
        str(BIN / "signoff"),
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--manifests",
        str(manifests),
        "--database",
        database,
        "--log-level",
        "warning",
    ]


async def connect(stack: AsyncExitStack, port: int, token: str | None) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
    url = f"http://127.0.0.1:{port}/mcp"
    return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))


async def measure(client: Any, tool: str, calls: int, samples: list[float]) -> None:
    for _ in range(calls):
        started = time.perf_counter()
        result = await client.call_tool(tool, {})
        samples.append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content}")


async def main(calls: int, rounds: int) -> str:
    from signoff.surfaces.access.jwt import issue_token

    peer_python = ensure_peer_venv()
    token = issue_token(
        SECRET, "bench-agent", "bench", ["bench"], ttl_seconds=7200, scopes=["signoff:propose"]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(PYTHONPATH=str(ROOT), SIGNOFF_JWT_SECRET=SECRET)
    ports = {name: free_port() for name in ("plain", "fastmcp", "sqlite", "memory")}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        me = str(ROOT / "benchmarks" / "http_peers.py")
        servers = [
            ([sys.executable, me, "--serve-plain", str(ports["plain"])], None),
            (
                [str(peer_python), me, "--serve-fastmcp", str(ports["fastmcp"]), str(tmp / "p.db")],
                None,
            ),
            (signoff_server(tmp, ports["sqlite"], f"sqlite+aiosqlite:///{tmp / 's.db'}"), env),
            (signoff_server(tmp, ports["memory"], "memory://"), env),
        ]
        cases = [
            ("plain `MCPServer` tool, no writes", "plain", "noop", None),
            ("FastMCP 4.1.6 + JSON Schema, CEL, 2 fsync'd audit commits", "fastmcp", "noop", None),
            ("signoff governed, SQLite", "sqlite", "bench_noop", token),
            ("signoff governed, memory store", "memory", "bench_noop", token),
        ]
        with (
            process(*servers[0]),
            process(*servers[1]),
            process(*servers[2]),
            process(*servers[3]),
        ):
            for port in ports.values():
                await wait_listening(port)
            async with AsyncExitStack() as stack:
                clients = {}
                for _, key, tool, bearer in cases:
                    clients[key] = await connect(stack, ports[key], bearer)
                    await clients[key].list_tools()
                    await measure(clients[key], tool, 30, [])  # warm-up
                samples: dict[str, list[float]] = {key: [] for _, key, _, _ in cases}
                medians: dict[str, list[float]] = {key: [] for _, key, _, _ in cases}
                per_round = max(1, calls // rounds)
                for n in range(rounds):
                    order = cases if n % 2 == 0 else cases[::-1]
                    for _, key, tool, _ in order:
                        got: list[float] = []
                        await measure(clients[key], tool, per_round, got)
                        samples[key] += got
                        medians[key].append(statistics.median(got))
                    print(
                        f"round {n + 1}: "
                        + ", ".join(f"{k} {v[-1] * 1e3:.2f} ms" for k, v in medians.items()),
                        flush=True,
                    )
    return render(cases, samples, medians, rounds, per_round)


def render(
    cases: list[tuple[str, str, str, str | None]],
    samples: dict[str, list[float]],
    medians: dict[str, list[float]],
    rounds: int,
    per_round: int,
) -> str:
    def ratio(key: str, base: str) -> float:
        pairs = zip(medians[key], medians[base], strict=True)
        return statistics.median(a / b for a, b in pairs)

    lines = [
        f"\nStreamable HTTP, one call at a time, {rounds} interleaved rounds of {per_round:,} "
        "calls per server; ratios are medians of the per-round ratios of median latencies.\n",
        "| server | median (ms) | p90 (ms) | calls/s | vs plain | vs FastMCP peer |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, key, _, _ in cases:
        ordered = sorted(samples[key])
        median = statistics.median(ordered)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        lines.append(
            f"| {label} | {median * 1e3:.2f} | {p90 * 1e3:.2f} | {1 / median:,.0f} | "
            f"{ratio(key, 'plain'):.2f}x | {ratio(key, 'fastmcp'):.2f}x |"
        )
    checks = [
        ("signoff SQLite vs plain", ratio("sqlite", "plain"), 1.5),
        ("signoff memory vs plain", ratio("memory", "plain"), 1.2),
        ("signoff SQLite vs FastMCP peer", ratio("sqlite", "fastmcp"), 1.0),
    ]
    lines.append("")
    for name, value, limit in checks:
        verdict = "met" if value <= limit else "NOT met"
        lines.append(f"- {name}: {value:.2f}x (target <= {limit}x) {verdict}")
    lines.append(
        f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs shared with other sessions "
        "(read the ratios)."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-plain"]:
        serve_plain(int(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1:2] == ["--serve-fastmcp"]:
        serve_fastmcp(int(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per server")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args()
    print(asyncio.run(main(args.calls, args.rounds)))
