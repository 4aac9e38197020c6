"""The CLI on the database records decisions and reconciles state; a serving process executes.

Each test runs the CLI and the server as separate processes and checks, by the pid the executor
reports, that the side effect ran in the server and never in the CLI.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from signoff import ActionProposal, Channel, Code, Principal, ProposerType
from signoff.app import Settings, build_application
from signoff.core.clock import new_token
from signoff.core.run import ActionRun, RunStatus
from signoff.store.factory import open_store
from tests.cli.server_support import AGENT, Server, cli, prepare, serving
from tests.surfaces.support import http_client

pytestmark = pytest.mark.slow

PAYER = Principal(id="agent-1", roles=("payer",))
ARGS = {"to": "ACME Supplies", "amount": 900}
FINAL = {"SUCCEEDED", "FAILED", "DENIED", "VALIDATION_FAILED", "CANCELLED"}


async def propose(server: Server, action: str, key: str) -> str:
    application = await build_application(
        Settings(database_url=server.database, manifests_dir=server.manifests)
    )
    try:
        outcome = await application.runtime.propose(
            ActionProposal(
                action_id=action,
                input=ARGS,
                principal=PAYER,
                tenant_id="acme",
                channel=Channel.MCP,
                proposer_type=ProposerType.AGENT,
                idempotency_key=key,
            )
        )
    finally:
        await application.close()
    assert outcome.code == Code.APPROVAL_REQUIRED
    return outcome.run_id


def local(server: Server, verb: str, run_id: str, approver: str) -> tuple[str, ...]:
    return (
        "approvals",
        verb,
        run_id,
        "--as",
        approver,
        "--tenant",
        "acme",
        "--roles",
        "payer-lead",
        "--database",
        server.database,
        "--manifests",
        str(server.manifests),
        "--json",
    )


async def settled(server: Server, run_id: str) -> dict[str, Any]:
    """The run's outcome once final, read by its proposer over MCP (long-polls, no sleeps)."""
    async with http_client(server.url, AGENT) as agent:
        for _ in range(10):
            result = await agent.call_tool(
                "signoff_get_run", {"run_id": run_id, "wait_seconds": 10}
            )
            outcome = result.structured_content
            assert isinstance(outcome, dict)
            if outcome["status"] in FINAL:
                return outcome
    raise AssertionError(f"run {run_id} never finished")


async def test_a_cli_approval_is_executed_by_the_serving_process_not_the_cli(
    tmp_path: Path,
) -> None:
    prepared = prepare(tmp_path)
    run_id = await propose(prepared, "pay.send", "p-1")
    status, out, err, cli_pid = await cli(
        prepared, *local(prepared, "approve", run_id, "lead-1"), PAYMENTS_TOKEN="operator-only"
    )
    assert status == 0, err
    answer = json.loads(out)
    assert answer["code"] == Code.APPROVAL_AWAITING_DISPATCH
    assert answer["outcome"]["output"] is None
    async with serving(tmp_path) as server:
        outcome = await settled(server, run_id)
    assert outcome["code"] == Code.SUCCEEDED
    assert outcome["output"]["pid"] == server.pid != cli_pid
    assert outcome["output"]["payments_token"] is None


async def test_one_os_user_cannot_cast_both_votes_of_a_two_person_quorum(tmp_path: Path) -> None:
    prepared = prepare(tmp_path)
    run_id = await propose(prepared, "pay.large", "p-2")
    status, out, err, _ = await cli(prepared, *local(prepared, "approve", run_id, "fin-1"))
    assert status == 0, err
    assert json.loads(out)["code"] == Code.APPROVAL_RECORDED
    status, _out, err, _ = await cli(prepared, *local(prepared, "approve", run_id, "fin-2"))
    assert status == 1
    assert err.strip().endswith(f"[{Code.APPROVAL_ALREADY_DECIDED}]")


async def test_recover_hands_a_crashed_run_to_the_serving_process(tmp_path: Path) -> None:
    prepared = prepare(tmp_path)
    # What a crash leaves: RUNNING, held by an incarnation that no longer exists.
    now = datetime.now(UTC)
    run = ActionRun(
        run_id=new_token(),
        tenant_id="acme",
        action_id="pay.resend",
        principal=PAYER,
        channel=Channel.MCP,
        proposer_type=ProposerType.AGENT,
        idempotency_key="r-1",
        input=ARGS,
        status=RunStatus.RUNNING,
        attempt=1,
        attempt_token=new_token(),
        executor_mode="sync",
        worker_id="gone-host-7/0000",
        dispatched_at=now,
        created_at=now,
        updated_at=now,
    )
    store = await open_store(prepared.database)
    try:
        async with store.unit() as unit:
            await unit.runs.create(run)
    finally:
        await store.close()
    status, out, err, _ = await cli(
        prepared,
        "recover",
        "--database",
        prepared.database,
        "--manifests",
        str(prepared.manifests),
        "--json",
    )
    assert status == 0, err
    report = json.loads(out)
    assert report["handed_over"] == [run.run_id] and report["redispatched"] == []
    async with serving(tmp_path) as server:
        outcome = await settled(server, run.run_id)
    assert outcome["code"] == Code.SUCCEEDED
    assert outcome["output"]["pid"] == server.pid
