"""SIGTERM on a real ``signoff serve`` holding background work: one run is executing (its thread
blocked for good, like a client call without a timeout) and three are queued behind it. The
process must exit 0 within its shutdown grace; the queued runs never start there and stay
durable, and the next process (same instance) runs them at start-up recovery, while the one cut
off mid-execution is recorded as interrupted."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from signoff import Code, ExecutionStatus
from signoff.core.run import RunStatus
from signoff.store.sql import open_sql_store
from tests.surfaces.support import DEADLINE, free_socket, http_client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")
GRACE = 2.0
QUEUED = 3
MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: bg.slow, title: Slow background work, description: Blocks its thread.}
spec:
  effect: write
  risk: low
  input:
    type: object
    properties: {n: {type: integer}}
    required: [n]
    additionalProperties: false
  idempotency: {key: required, scope: principal}
  policy: {roles: [billing]}
  approval: {when: "false"}
  executor: {mode: async, python: "tests.ops.background_hooks:slow"}
"""


class Served:
    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url

    async def line(self, wanted: str) -> str:
        """The next stdout line starting with ``wanted`` (the hook prints there)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(DEADLINE):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"the server exited before printing {wanted!r}")
                if raw.decode().startswith(wanted):
                    return raw.decode().strip()


@asynccontextmanager
async def serving(tmp_path: Path, **env: str) -> AsyncIterator[Served]:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    environ.update(
        PYTHONPATH=str(ROOT),
        SIGNOFF_INSTANCE_ID="bg-shutdown",  # the next life of this instance recovers at once
        SIGNOFF_LANE_TENANT_SHARE="0.0625",  # one tenant runs one background job at a time
        **env,
    )
    # The usual flags of a loopback test server: a fixed identity, no token checks.
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        *("serve", "--transport", "http", "--port", str(port), "--fixed-identity"),
        *("--principal", "agent-1", "--tenant", "acme", "--roles", "billing"),
        *("--database", f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"),
        *("--manifests", str(tmp_path / "manifests"), "--no-reload"),
        *("--shutdown-grace", str(GRACE)),
        cwd=tmp_path,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        seen: list[str] = []
        while not any("Uvicorn running" in line for line in seen):
            line = await asyncio.wait_for(process.stderr.readline(), DEADLINE)
            assert line, "the server exited early:\n" + "".join(seen)
            seen.append(line.decode())
        yield Served(process, f"http://127.0.0.1:{port}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _runs(tmp_path: Path) -> dict[str, tuple[RunStatus, str | None, bool]]:
    """Each run: its stored status, its result code, whether it was dispatched."""
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}")
    try:
        async with store.unit() as unit:
            runs = await unit.runs.list(limit=100)
    finally:
        await store.close()
    return {
        run.run_id: (
            run.status,
            run.result.code if run.result is not None else None,
            run.dispatched_at is not None,
        )
        for run in runs
    }


async def test_sigterm_leaves_queued_work_durable_and_exits_within_the_grace(
    tmp_path: Path,
) -> None:
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "bg.yaml").write_text(MANIFEST)
    async with serving(tmp_path) as served:
        async with http_client(served.url, None) as agent:
            for n in range(1 + QUEUED):
                accepted = await agent.call_tool("bg_slow", {"n": n, "idempotency_key": f"k{n}"})
                assert accepted.structured_content is not None
                assert accepted.structured_content["status"] == ExecutionStatus.ACCEPTED
            running = (await served.line("started")).split()[1]
        served.process.send_signal(signal.SIGTERM)
        # A hang guard, not a timing claim: the grace is 2 s, the guard 30 s.
        assert await asyncio.wait_for(served.process.wait(), DEADLINE) == 0
        assert served.process.stdout is not None
        assert b"started" not in await served.process.stdout.read()  # nothing queued started

    left = await _runs(tmp_path)
    assert len(left) == 1 + QUEUED
    assert left[running] == (RunStatus.RUNNING, None, True)
    queued = [run_id for run_id in left if run_id != running]
    assert all(left[run_id] == (RunStatus.RUNNING, None, False) for run_id in queued)

    async with serving(tmp_path, BG_HOOK="quick") as again:  # recovery runs before serving
        again.process.terminate()
        assert await asyncio.wait_for(again.process.wait(), DEADLINE) == 0
    done = await _runs(tmp_path)
    assert done[running][:2] == (RunStatus.FAILED, Code.ACTION_INTERRUPTED)
    assert all(done[run_id][:2] == (RunStatus.SUCCEEDED, Code.SUCCEEDED) for run_id in queued)
