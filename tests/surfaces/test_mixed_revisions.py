"""A rolling manifest change: two ``signoff serve`` processes on one PostgreSQL database hold
different revisions of ``invoice.cancel``. A quorum completed on the instance that holds the
other revision is handed to the instance holding the revision it was asked under; once that
instance is gone, the approval is asked again under the new revision — never denied."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from signoff import Code
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.surfaces.access.jwt import issue_token
from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_PROPOSE
from tests.store.conftest import POSTGRES_ENV, scratch_database
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import DEADLINE, free_socket

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

SIGNOFF = str(Path(sys.executable).parent / "signoff")
SECRET = "a-shared-jwt-secret-for-both-instances-0123"
PROPOSAL = {"invoice_id": "INV-1002", "amount": 4200.0, "idempotency_key": "rolling-1"}
LEADS = ("lead-1", "lead-2", "lead-3")


@pytest.fixture
def database() -> Iterator[str]:
    with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True) as url:
        yield url


def revision(tmp_path: Path, name: str, extra: str) -> Path:
    """The demo manifests with ``invoice.cancel`` needing two billing leads, plus ``extra``
    (a governed change, so the two copies are two revisions)."""
    folder = tmp_path / name
    shutil.copytree(DEMO_MANIFESTS, folder)
    cancel = folder / "invoice-cancel.yaml"
    text = cancel.read_text().replace(
        "approvers: {roles: [billing-lead], count: 1}",
        "approvers: {roles: [billing-lead], count: 2}",
    )
    cancel.write_text(text.replace("  risk: high\n", f"  risk: {extra}\n"))
    return folder


@asynccontextmanager
async def instance(
    name: str, database: str, manifests: Path, tmp_path: Path
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """``signoff serve`` over HTTP as its own process, housekeeping every second, with demo
    invoices of its own."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(
        SIGNOFF_JWT_SECRET=SECRET,
        SIGNOFF_INSTANCE_ID=name,
        SIGNOFF_HOUSEKEEPING_EVERY="1",
        SIGNOFF_DEMO_INVOICES_DB=str(tmp_path / f"invoices-{name}.db"),
    )
    process = await asyncio.create_subprocess_exec(
        SIGNOFF, "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port),
        "--database", database, "--manifests", str(manifests),
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
        yield port, process
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), DEADLINE)
        await asyncio.wait_for(drainer, DEADLINE)


class Site:
    def __init__(self, http: httpx2.AsyncClient, port: int) -> None:
        self.http = http
        self.url = f"http://127.0.0.1:{port}"

    async def run(self, run_id: str, lead: str = "lead-3") -> dict[str, Any]:
        reply = await self.http.get(f"{self.url}/api/runs/{run_id}", headers=approver(lead))
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body

    async def approve(self, run_id: str, lead: str) -> dict[str, Any]:
        shown = await self.run(run_id, lead)
        reply = await self.http.post(
            f"{self.url}/api/runs/{run_id}/approve",
            json={"reason": "checked", "expected_version": shown["version"]},
            headers=approver(lead),
        )
        assert reply.status_code in (200, 409), reply.text
        body: dict[str, Any] = reply.json()
        return body


def approver(lead: str) -> dict[str, str]:
    token = issue_token(SECRET, lead, "acme", ["billing-lead"], scopes=[DEFAULT_APPROVE])
    return {"Authorization": f"Bearer {token}"}


async def until(
    site: Site, run_id: str, status: str, received: int | None = None
) -> dict[str, Any]:
    """The run as the approvers' API shows lead-1 (who decided it), once its outcome reads
    ``status`` (with ``received`` standing approvals)."""
    deadline = asyncio.get_running_loop().time() + DEADLINE * 3
    while True:
        shown = await site.run(run_id, "lead-1")
        approval = shown["outcome"].get("approval") or {}
        counted = received is None or approval.get("approvals_received") == received
        if shown["outcome"]["status"] == status and counted:
            return shown
        assert asyncio.get_running_loop().time() < deadline, shown
        await asyncio.sleep(0.2)


async def test_a_rolling_change_hands_the_approval_over_then_asks_again(
    database: str, tmp_path: Path
) -> None:
    agent = issue_token(SECRET, "agent-1", "acme", ["billing"], scopes=[DEFAULT_PROPOSE])
    old, new = revision(tmp_path, "old", "high"), revision(tmp_path, "new", "critical")
    async with (
        instance("old", database, old, tmp_path) as (port_old, old_process),
        instance("new", database, new, tmp_path) as (port_new, _),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        on_old, on_new = Site(http, port_old), Site(http, port_new)
        mcp = RawClient(http, on_old.url, agent)
        created = await mcp.call("tools/call", {"name": "invoice_cancel", "arguments": PROPOSAL})
        run_id = created["result"]["structuredContent"]["run_id"]
        assert (await on_old.approve(run_id, "lead-1"))["code"] == Code.APPROVAL_RECORDED
        # The second approval arrives on the instance with the other revision: handed over.
        handed = await on_new.approve(run_id, "lead-2")
        assert handed["code"] == Code.APPROVAL_AWAITING_DISPATCH, handed
        assert handed["outcome"]["status"] == "PENDING_APPROVAL"
        done = await until(on_new, run_id, "SUCCEEDED")
        assert done["outcome"]["code"] == Code.SUCCEEDED

        # A second run asked under the old revision; then the old instance goes away.
        # (Each instance has its own demo invoices, so INV-1002 is still open where it runs.)
        again = {**PROPOSAL, "idempotency_key": "rolling-2"}
        created = await mcp.call("tools/call", {"name": "invoice_cancel", "arguments": again})
        second = created["result"]["structuredContent"]["run_id"]
        assert (await on_old.approve(second, "lead-1"))["code"] == Code.APPROVAL_RECORDED
        handed = await on_new.approve(second, "lead-2")
        assert handed["code"] == Code.APPROVAL_AWAITING_DISPATCH
        old_process.kill()
        await old_process.wait()
        asked = await until(on_new, second, "PENDING_APPROVAL", received=0)
        assert asked["approval"]["digest"] != handed["outcome"]["approval"]["digest"]
        assert (await on_new.approve(second, "lead-1"))["code"] == Code.APPROVAL_RECORDED
        finished = await on_new.approve(second, "lead-3")
        assert finished["code"] == Code.SUCCEEDED, finished
