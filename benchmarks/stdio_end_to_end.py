"""End to end over stdio: a governed no-op on SQLite vs a plain MCP tool making the same writes durable.

Two subprocesses, one official ``mcp`` client each (``Client(StdioServerParameters(...))``),
called one after the other in interleaved rounds so drift hits both alike:

- governed: ``signoff serve --transport stdio`` on a SQLite file (WAL, ``synchronous=FULL``, the
  defaults) with one read-only no-op action (``bench.noop``, JSON Schema input, a role policy):
  every call creates a run, resolves, validates, evaluates policy, dispatches and records the
  result with its audit chain — two durable commits;
- plain (the floor): an ``MCPServer`` (``mcp`` v2) whose ``noop`` tool writes the same rows with
  stdlib ``sqlite3`` inline, in the same two transactions, WAL and ``synchronous=FULL``: the run
  and the audit events before dispatch plus the tenant's chain head, commit; then the run's
  final state, the last audit event and the head, commit. The row contents (JSON sizes) are
  copied from a governed run after warm-up. It governs nothing.

    .venv/bin/python benchmarks/stdio_end_to_end.py [--calls 1000] [--rounds 5]

Target (issue 18): governed calls/s >= 0.8x the plain tool's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

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


# ------------------------------------------------------------------------- the plain peer server
def serve_plain(database: str, payload_path: str) -> None:
    """The floor: an MCPServer tool doing the governed call's writes with stdlib sqlite3."""
    import secrets
    from datetime import UTC, datetime

    from mcp.server import MCPServer

    payload = json.loads(Path(payload_path).read_text())
    db = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.executescript(
        "CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, tenant_id TEXT, "
        "action_id TEXT, status TEXT, version INTEGER, principal_id TEXT, created_at TEXT, "
        "updated_at TEXT, data TEXT);"
        "CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, "
        "tenant_id TEXT, kind TEXT, at TEXT, actor TEXT, status TEXT, code TEXT, data TEXT, "
        "chain_seq INTEGER, prev_hash TEXT, hash TEXT);"
        "CREATE TABLE IF NOT EXISTS heads (tenant_id TEXT PRIMARY KEY, chain_seq INTEGER, "
        "head_hash TEXT);"
    )
    chain = [0]
    server = MCPServer("plain", log_level="WARNING")

    def audit(run_id: str, rows: list[list[Any]], now: str) -> None:
        for kind, actor, status, code, data in rows:
            chain[0] += 1
            db.execute(
                "INSERT INTO audit (run_id, tenant_id, kind, at, actor, status, code, data, "
                "chain_seq, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    "bench",
                    kind,
                    now,
                    actor,
                    status,
                    code,
                    data,
                    chain[0],
                    "0" * 64,
                    "h" * 64,
                ),
            )
        db.execute(
            "INSERT INTO heads VALUES ('bench', ?, ?) ON CONFLICT (tenant_id) "
            "DO UPDATE SET chain_seq = excluded.chain_seq, head_hash = excluded.head_hash",
            (chain[0], "h" * 64),
        )

    @server.tool()
    async def noop(note: str | None = None) -> dict[str, Any]:
        """Does nothing, durably."""
        run_id = secrets.token_hex(16)
        now = datetime.now(UTC).isoformat()
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
            (
                run_id,
                "bench",
                "bench.noop",
                "RUNNING",
                1,
                "bench-agent",
                now,
                now,
                payload["run_created"],
            ),
        )
        audit(run_id, payload["audit_before"], now)
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "UPDATE runs SET status = ?, version = version + 1, updated_at = ?, data = ? "
            "WHERE run_id = ? AND version = 1",
            ("SUCCEEDED", now, payload["run_final"], run_id),
        )
        audit(run_id, payload["audit_after"], now)
        db.execute("COMMIT")
        return {}

    server.run("stdio")


# ----------------------------------------------------------------------------- the benchmark
def governed_params(tmp: Path) -> StdioServerParameters:
    manifests = tmp / "manifests"
    manifests.mkdir()
    (manifests / "noop.yaml").write_text(MANIFEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["PYTHONPATH"] = str(ROOT)
    return StdioServerParameters(
        command=str(BIN / "signoff"),
        args=[
            "serve",
            "--transport",
            "stdio",
            "--manifests",
            str(manifests),
            "--database",
            f"sqlite+aiosqlite:///{tmp / 'governed.db'}",
            "--principal",
            "bench-agent",
            "--tenant",
            "bench",
            "--roles",
            "bench",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=str(ROOT),
    )


def capture(database: Path) -> dict[str, Any]:
    """One governed run's rows as stored, for the plain tool to write again."""
    db = sqlite3.connect(database)
    run_id, data = db.execute(
        "SELECT run_id, data FROM signoff_runs ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    rows = db.execute(
        "SELECT kind, actor, status, code, data FROM signoff_audit_events WHERE run_id = ? "
        "ORDER BY seq",
        (run_id,),
    ).fetchall()
    db.close()
    created = json.loads(data)
    created.update(status="RUNNING", result=None, version=1)
    return {
        "run_created": json.dumps(created),
        "run_final": data,
        "audit_before": [list(r) for r in rows[:-1]],
        "audit_after": [list(rows[-1])],
    }


async def timed(client: Client, tool: str, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        result = await client.call_tool(tool, {})
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content}")
    return calls / (time.perf_counter() - start)


async def main(calls: int, rounds: int) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        async with AsyncExitStack() as stack:
            governed = await stack.enter_async_context(Client(governed_params(tmp)))
            await timed(governed, "bench_noop", 50)  # warm-up; also the rows to copy
            payload = tmp / "payload.json"
            captured = capture(tmp / "governed.db")
            payload.write_text(json.dumps(captured))
            plain = await stack.enter_async_context(
                Client(
                    StdioServerParameters(
                        command=sys.executable,
                        args=[__file__, "--serve-plain", str(tmp / "plain.db"), str(payload)],
                        cwd=str(ROOT),
                    )
                )
            )
            await timed(plain, "noop", 50)
            rates: dict[str, list[float]] = {"plain": [], "governed": []}
            per_round = max(1, calls // rounds)
            for n in range(rounds):
                order = ("plain", "governed") if n % 2 == 0 else ("governed", "plain")
                for name in order:
                    client, tool = (plain, "noop") if name == "plain" else (governed, "bench_noop")
                    rates[name].append(await timed(client, tool, per_round))
                ratio = rates["governed"][-1] / rates["plain"][-1]
                print(
                    f"round {n + 1}: plain {rates['plain'][-1]:,.0f}/s, "
                    f"governed {rates['governed'][-1]:,.0f}/s ({ratio:.2f}x)",
                    flush=True,
                )
    ratios = [g / p for g, p in zip(rates["governed"], rates["plain"], strict=True)]
    plain_rate = statistics.median(rates["plain"])
    governed_rate = statistics.median(rates["governed"])
    ratio = statistics.median(ratios)
    before = len(captured["audit_before"])
    return "\n".join(
        [
            f"\nstdio, one client each, {rounds} interleaved rounds of {per_round:,} calls; "
            f"writes per call: run + {before} audit events + chain head, commit; run + 1 audit "
            "event + chain head, commit.\n",
            "| server | calls/s (median) | ms/call | vs plain |",
            "|---|---:|---:|---:|",
            f"| plain `MCPServer` tool + stdlib sqlite3 (floor) | {plain_rate:,.0f} | "
            f"{1e3 / plain_rate:.2f} | 1.00x |",
            f"| signoff governed no-op, SQLite | {governed_rate:,.0f} | "
            f"{1e3 / governed_rate:.2f} | {ratio:.2f}x |",
            "",
            f"- median of the per-round ratios: {ratio:.2f}x (target >= 0.8x) "
            f"{'met' if ratio >= 0.8 else 'NOT met'}",
            f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs "
            "(shared with other sessions: read the ratio).",
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-plain":
        serve_plain(sys.argv[2], sys.argv[3])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per server")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args()
    print(asyncio.run(main(args.calls, args.rounds)))
