"""Stateless scale-out: two ``signoff serve`` processes on one PostgreSQL database behind a
round-robin proxy with no session affinity serve 2026-07-28 requests interchangeably."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from signoff import Code, ExecutionStatus
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.surfaces.access.jwt import issue_token
from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_PROPOSE
from signoff.surfaces.mcp.tasks import EXTENSION
from tests.store.conftest import POSTGRES_ENV, scratch_database
from tests.surfaces.proxy import round_robin
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import DEADLINE, free_socket

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")
SECRET = "a-shared-jwt-secret-for-both-instances-0123"
TASK_SECRET = "a-shared-task-secret-for-both-instances"
PROPOSAL = {"invoice_id": "INV-1002", "amount": 4200.0, "idempotency_key": "scale-1"}


@pytest.fixture
def database() -> Iterator[str]:
    with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True) as url:
        yield url


@asynccontextmanager
async def instance(name: str, database: str, tmp_path: Path) -> AsyncIterator[int]:
    """``signoff serve`` over HTTP as its own process; yields its port once it accepts."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(
        SIGNOFF_JWT_SECRET=SECRET,
        SIGNOFF_TASK_SECRET=TASK_SECRET,
        SIGNOFF_INSTANCE_ID=name,
        SIGNOFF_DEMO_INVOICES_DB=str(tmp_path / "invoices.db"),
    )
    process = await asyncio.create_subprocess_exec(
        SIGNOFF, "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port),
        "--database", database, "--manifests", str(DEMO_MANIFESTS),
        cwd=tmp_path, env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stderr is not None
    seen: list[str] = []
    ready = asyncio.Event()

    async def drain(stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            seen.append(line.decode(errors="replace"))
            if "Application startup complete" in seen[-1]:
                ready.set()

    drainer = asyncio.create_task(drain(process.stderr))
    try:
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({waiter, drainer}, timeout=DEADLINE * 3, return_when="FIRST_COMPLETED")
        waiter.cancel()
        assert ready.is_set(), f"instance {name} did not start:\n" + "".join(seen)
        yield port
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), DEADLINE)
        await asyncio.wait_for(drainer, DEADLINE)


def outcome_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    content: dict[str, Any] = reply["result"]["structuredContent"]
    return content


async def test_propose_on_one_instance_approve_on_the_other_and_read_the_result_on_either(
    database: str, tmp_path: Path
) -> None:
    agent = issue_token(SECRET, "agent-1", "acme", ["billing"], scopes=[DEFAULT_PROPOSE])
    lead = issue_token(SECRET, "lead-1", "acme", ["billing-lead"], scopes=[DEFAULT_APPROVE])
    # No keep-alive: one connection per request, so the proxy alternates A, B, A, B, ...
    limits = httpx2.Limits(max_keepalive_connections=0)
    async with (
        instance("a", database, tmp_path) as port_a,
        instance("b", database, tmp_path) as port_b,
        round_robin([port_a, port_b]) as (url, router),
        httpx2.AsyncClient(limits=limits, timeout=60) as http,
    ):
        tasks = RawClient(http, url, agent, capabilities={"extensions": {EXTENSION: {}}})
        plain = RawClient(http, url, agent)
        created = await tasks.call("tools/call", {"name": "invoice_cancel", "arguments": PROPOSAL})
        task_id = created["result"]["taskId"]
        run_id = task_id.rpartition(".")[0]
        working = await tasks.call("tasks/get", {"taskId": task_id})
        poll = asyncio.create_task(
            plain.call(
                "tools/call",
                {"name": "signoff_get_run", "arguments": {"run_id": run_id, "wait_seconds": 25}},
            )
        )
        await router.until_routed(3, DEADLINE)
        # The version the approver is shown, read past the proxy (the routing stays A, B, ...).
        shown = await http.get(
            f"http://127.0.0.1:{port_a}/api/runs/{run_id}",
            headers={"Authorization": f"Bearer {lead}"},
        )
        approved = await http.post(
            f"{url}/api/runs/{run_id}/approve",
            json={"reason": "checked", "expected_version": shown.json()["version"]},
            headers={"Authorization": f"Bearer {lead}"},
        )
        polled = await asyncio.wait_for(poll, DEADLINE * 3)
        done_here = await tasks.call("tasks/get", {"taskId": task_id})
        done_there = await tasks.call("tasks/get", {"taskId": task_id})

    # propose A, tasks/get B, long-poll A, approve B, tasks/get A and B: no affinity anywhere.
    assert router.routed == [0, 1, 0, 1, 0, 1]
    assert created["result"]["resultType"] == "task"
    assert working["result"]["status"] == "working"
    assert approved.status_code == 200, approved.text
    assert outcome_of(polled)["status"] == ExecutionStatus.SUCCEEDED
    for reply in (done_here, done_there):
        assert reply["result"]["status"] == "completed"
        assert reply["result"]["result"]["structuredContent"]["code"] == Code.SUCCEEDED
