"""A real `signoff serve` process for CLI tests, and the CLI as its own process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from signoff.surfaces.access.jwt import issue_token
from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_PROPOSE
from tests.surfaces.support import DEADLINE, free_socket

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")
SECRET = "a-test-secret-that-is-long-enough-for-hs256"
MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: pay.send, title: Send a payment, description: Pay someone.}
spec:
  effect: financial
  risk: high
  input:
    type: object
    properties: {to: {type: string}, amount: {type: number}}
    required: [to, amount]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [payer]}
  approval:
    when: "true"
    approvers: {roles: [payer-lead], count: 1}
    expires_after: 1h
  executor: {mode: sync, python: "tests.cli.pid_hooks:send"}
---
apiVersion: signoff/v1
kind: Action
metadata: {id: pay.resend, title: Resend a payment advice, description: Idempotent resend.}
spec:
  effect: external_send
  risk: low
  input:
    type: object
    properties: {to: {type: string}, amount: {type: number}}
    required: [to, amount]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [payer]}
  approval: {when: "false"}
  executor: {mode: sync, python: "tests.cli.pid_hooks:send", idempotent: true}
---
apiVersion: signoff/v1
kind: Action
metadata: {id: pay.large, title: Send a large payment, description: Two people approve.}
spec:
  effect: financial
  risk: critical
  input:
    type: object
    properties: {to: {type: string}, amount: {type: number}}
    required: [to, amount]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [payer]}
  approval:
    when: "true"
    approvers: {roles: [payer-lead], count: 2}
    expires_after: 1h
  executor: {mode: sync, python: "tests.cli.pid_hooks:send"}
---
apiVersion: signoff/v1
kind: Action
metadata: {id: pay.guarded, title: Send a checked payment, description: A guard checks the payee.}
spec:
  effect: financial
  risk: high
  input:
    type: object
    properties: {to: {type: string}, amount: {type: number}}
    required: [to, amount]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [payer]}
  approval:
    when: "true"
    approvers: {roles: [payer-lead], count: 1}
    expires_after: 1h
  guard: tests.cli.pid_hooks:refuse_blocked
  executor: {mode: sync, python: "tests.cli.pid_hooks:send"}
"""


@dataclass
class Server:
    url: str
    pid: int
    tmp: Path

    @property
    def database(self) -> str:
        return f"sqlite+aiosqlite:///{self.tmp / 'signoff.db'}"

    @property
    def manifests(self) -> Path:
        return self.tmp / "manifests"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        # This checkout's sources first: the shared virtualenv may hold another checkout's.
        env.update(PYTHONPATH=os.pathsep.join((str(ROOT / "src"), str(ROOT))))
        env.update(extra)
        return env


def token(sub: str, roles: list[str], scope: str) -> str:
    return issue_token(SECRET, sub, "acme", roles, scopes=[scope])


AGENT = token("agent-1", ["payer", "payer-lead"], DEFAULT_PROPOSE)
LEAD = token("lead-1", ["payer-lead"], DEFAULT_APPROVE)


def prepare(tmp_path: Path) -> Server:
    """The manifests in ``tmp_path``; no server yet (``url`` and ``pid`` empty)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "pay.yaml").write_text(MANIFEST)
    return Server("", 0, tmp_path)


@asynccontextmanager
async def serving(tmp_path: Path, **env: str) -> AsyncIterator[Server]:
    """``signoff serve --transport http`` on the SQLite file in ``tmp_path``, until the block ends
    (``env``: more of its environment)."""
    prepared = prepare(tmp_path)
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--database",
        prepared.database,
        "--manifests",
        str(prepared.manifests),
        "--no-reload",
        cwd=tmp_path,
        env=prepared.env(SIGNOFF_JWT_SECRET=SECRET, **env),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        lines: list[str] = []
        while not any("Uvicorn running" in line for line in lines):
            line = await asyncio.wait_for(process.stderr.readline(), DEADLINE)
            assert line, "the server exited early:\n" + "".join(lines)
            lines.append(line.decode())
        yield Server(f"http://127.0.0.1:{port}", process.pid, tmp_path)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), DEADLINE)


async def cli(server: Server, *args: str, **env: str) -> tuple[int, str, str, int]:
    """Run ``signoff`` as its own process: exit status, stdout, stderr and its pid."""
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        *args,
        cwd=server.tmp,
        env=server.env(**env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), DEADLINE * 3)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode(), process.pid
