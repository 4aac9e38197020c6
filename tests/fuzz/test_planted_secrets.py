"""One message rule for every executor mode (contract §4): a planted secret never reaches the agent.

Each case plants the same thing — a traceback naming a file path, a DSN with a password, a URL
with a token — where a real integration would put it: raised by the executor (sync, async),
by a deferred dispatch, a guard, a preview or a cancel hook, or returned as a result's message by
the executor, a completion, a guard, a preview, a cancel hook, every retried attempt, or an HTTP
upstream's reason phrase. Then every way an agent can read the run is tried: the call's answer,
``signoff_get_run``, the run resource, ``tasks/get``, and the same call again (the stored result
replayed to a duplicate). None may carry any of it, and the stored run neither; the run's audit
trail must carry the detail, redacted (``***`` where the password and token were).

On the memory store, SQLite and PostgreSQL (when ``SIGNOFF_TEST_POSTGRES_URL`` is set).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from signoff import Code, ExecutionContext, ExecutionResult, GuardDecision
from signoff.core.definition import RetrySpec
from signoff.core.ports import Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.executors.http.executor import HttpExecutor
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.mcp.tasks import EXTENSION, TaskIds
from tests.helpers import NO_APPROVAL, definition
from tests.store.conftest import ALL, Backend, _url_for, mysql_url, postgres_url
from tests.surfaces.rawrpc import RawClient
from tests.surfaces.support import DEADLINE, running

__all__ = ["mysql_url", "postgres_url"]  # session fixtures this module's backends use

SECRET = "S3cr3tPassw0rd-" + secrets.token_hex(4)
DSN = f"postgresql://erp_user:{SECRET}@db.internal:5432/erp"
URL = f"https://erp.internal/status?token={SECRET}"
LINE = f'connect to {DSN} failed, see {URL} (File "/srv/erp/client.py", line 12)'
PLANT = f"Traceback (most recent call last):\n  {LINE}\nRuntimeError: {LINE}"
# Nothing an agent reads may carry any of these.
FORBIDDEN = re.compile(
    rf"{re.escape(SECRET)}|erp_user|db\.internal|erp\.internal|/srv/erp|postgresql://|https://erp|"
    r"Traceback|RuntimeError|client\.py"
)
# What the audit trail keeps of it: the DSN and the URL, their credentials redacted.
REDACTED = ("postgresql://***@db.internal", "token=***")
TASK_SECRET = b"a-task-secret-for-the-planted-secrets"
SMALL = {"invoice_id": "INV-1", "amount": 10, "idempotency_key": "k-1"}
LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}


class Planted(RuntimeError):
    pass


def _raise(_context: ExecutionContext) -> Any:
    raise Planted(PLANT)


async def _raise_async(_context: ExecutionContext) -> Any:
    raise Planted(PLANT)


def _failure(_context: ExecutionContext) -> ExecutionResult:
    return ExecutionResult.failure("ERP_DOWN", PLANT)


def _retryable(_context: ExecutionContext) -> ExecutionResult:
    return ExecutionResult.retryable_failure("ERP_BUSY", PLANT)


def _succeeded_with_plant(_context: ExecutionContext) -> ExecutionResult:
    return ExecutionResult.succeeded({"posted": True}, message=PLANT)


async def _accepted(_context: ExecutionContext) -> dict[str, Any]:
    return {"provider_ref": "op-1"}


def _deny(_context: ExecutionContext) -> GuardDecision:
    return GuardDecision.deny("ERP_REFUSED", PLANT)


def _cancel_failed(_context: ExecutionContext) -> ExecutionResult:
    return ExecutionResult.failure("ERP_CANCEL_FAILED", PLANT)


@dataclass
class Served:
    runtime: Runtime
    client: RawClient
    store: Store
    tenant: str
    replies: list[str] = field(default_factory=list)
    """Raw answers the agent got besides the first call's (a cancel's)."""


Drive = Callable[[Served, str], Awaitable[None]]


async def _nothing(_served: Served, _run_id: str) -> None:
    return None


async def _complete_with_plant(served: Served, run_id: str) -> None:
    run = await served.runtime.get_run(run_id, served.tenant)
    assert run is not None and run.attempt_token is not None
    result = ExecutionResult.failure("ERP_DOWN", PLANT)
    completion = await served.runtime.complete(
        run_id, run.attempt_token, result, tenant_id=served.tenant
    )
    assert completion.accepted, completion


async def _agent_cancels(served: Served, run_id: str) -> None:
    reply = await served.client.call(
        "tools/call", {"name": "signoff_cancel_run", "arguments": {"run_id": run_id}}
    )
    assert "result" in reply, reply
    served.replies.append(json.dumps(reply))


class _Upstream:
    """A loopback HTTP server answering ``503`` with the plant as its reason phrase."""

    server: asyncio.Server | None = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            head = f"HTTP/1.1 503 {LINE}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            writer.write(head.encode())
            await writer.drain()
        finally:
            writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/post"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@dataclass(frozen=True)
class Case:
    """``fields``: the definition's; ``arguments``: the call; ``then``: what happens next."""

    name: str
    fields: dict[str, Any]
    arguments: dict[str, Any]
    then: Drive = _nothing
    code: str | None = None


CASES = [
    Case("sync executor raises", {"executor": _raise}, SMALL, code=Code.ACTION_EXECUTION_EXCEPTION),
    Case("sync executor returns the plant", {"executor": _failure}, SMALL, code="ERP_DOWN"),
    Case(
        "sync executor succeeds with the plant",
        {"executor": _succeeded_with_plant},
        SMALL,
        code=Code.SUCCEEDED,
    ),
    Case(
        "async executor raises",
        {"executor": _raise_async, "mode": "async"},
        SMALL,
        code=Code.ACTION_EXECUTION_EXCEPTION,
    ),
    Case(
        "async executor returns the plant",
        {"executor": _failure, "mode": "async"},
        SMALL,
        code="ERP_DOWN",
    ),
    Case(
        "deferred dispatch raises",
        {"executor": _raise, "mode": "deferred"},
        SMALL,
        code=Code.ACTION_EXECUTION_EXCEPTION,
    ),
    Case(
        "deferred dispatch answers the plant at once",
        {"executor": _failure, "mode": "deferred"},
        SMALL,
        code="ERP_DOWN",
    ),
    Case(
        "external completion carries the plant",
        {"executor": _accepted, "mode": "deferred"},
        SMALL,
        _complete_with_plant,
        code="ERP_DOWN",
    ),
    Case(
        "cancel hook raises",
        {"executor": _accepted, "mode": "deferred", "cancel": _raise},
        SMALL,
        _agent_cancels,
        code=Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED,
    ),
    Case(
        "cancel hook answers the plant",
        {"executor": _accepted, "mode": "deferred", "cancel": _cancel_failed},
        SMALL,
        _agent_cancels,
        code=Code.ACTION_CANCELLED_EXTERNAL_CANCEL_FAILED,
    ),
    Case(
        "preview raises",
        {"executor": _accepted, "preview": _raise},
        LARGE,
        code=Code.PREVIEW_FAILED,
    ),
    Case(
        "preview answers the plant",
        {"executor": _accepted, "preview": _failure},
        LARGE,
        code="ERP_DOWN",
    ),
    Case(
        "guard raises",
        {"executor": _accepted, "guard": _raise},
        SMALL,
        code=Code.PRE_EXECUTION_DENIED,
    ),
    Case("guard denies with the plant", {"executor": _accepted, "guard": _deny}, SMALL),
    Case(
        "every retried attempt returns the plant",
        {
            "executor": _retryable,
            "retry": RetrySpec(attempts=3, backoff=timedelta(seconds=1)),
            "executor_idempotent": True,
        },
        SMALL,
        code="ERP_BUSY",
    ),
]


@pytest.fixture(params=ALL[:3])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend = Backend(request.param, _url_for(request.param, request, tmp_path))
    try:
        yield await backend.open()
    finally:
        await backend.close_all()


async def _no_sleep(_seconds: float) -> None:
    return None


async def _read_everything(served: Served, run_id: str, case: Case) -> list[str]:
    """Every answer an agent can get about the run, as raw JSON text."""
    client = served.client
    task_id = TaskIds(TASK_SECRET).issue(served.tenant, run_id)
    answers = [
        await client.call(
            "tools/call", {"name": "signoff_get_run", "arguments": {"run_id": run_id}}
        ),
        await client.call("resources/read", {"uri": f"signoff://runs/{run_id}"}),
        await client.call("tasks/get", {"taskId": task_id}),
        # The same call again: a finished run's stored result is replayed to the duplicate.
        await client.call("tools/call", {"name": "invoice_cancel", "arguments": case.arguments}),
    ]
    for answer in answers:
        assert "result" in answer, answer
    return [json.dumps(answer) for answer in answers]


async def _audit_text(store: Store, run_id: str) -> tuple[str, list[str]]:
    async with store.unit() as unit:
        events = await unit.audit.list_for_run(run_id)
    details = [str(e.data["detail"]) for e in events if e.data and "detail" in e.data]
    return json.dumps([dataclasses.asdict(e) for e in events], default=str), details


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_a_planted_secret_reaches_the_audit_trail_redacted_and_never_the_agent(
    case: Case, store: Store
) -> None:
    fields = {"approval": NO_APPROVAL, **case.fields}
    if case.arguments is LARGE:
        fields.pop("approval")  # the default asks for approval above 1000: the preview runs
    registry = ActionRegistry([definition(**fields)])
    runtime = Runtime(registry, store, sleep=_no_sleep)
    await _exercise(case, runtime, store)


async def _exercise(
    case: Case, runtime: Runtime, store: Store, upstream: _Upstream | None = None
) -> None:
    # A tenant of its own: PostgreSQL's database is shared by the whole session.
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    caller = make_caller("agent-1", tenant, "billing")
    app = build_http_app(
        runtime, FixedIdentity(caller, "127.0.0.1"), HttpOptions(task_secret=TASK_SECRET)
    )
    try:
        async with running(app) as url, httpx2.AsyncClient(timeout=DEADLINE) as http:
            client = RawClient(http, url, capabilities={"extensions": {EXTENSION: {}}})
            served = Served(runtime, client, store, tenant)
            first = await client.call(
                "tools/call", {"name": "invoice_cancel", "arguments": case.arguments}
            )
            assert "result" in first, first
            run_id = _run_id(first["result"])
            await case.then(served, run_id)
            await runtime.drain()
            replies = [json.dumps(first), *served.replies]
            replies += await _read_everything(served, run_id, case)
    finally:
        await runtime.drain()
        if upstream is not None:
            await upstream.stop()

    leaked = {m.group(0) for reply in replies for m in FORBIDDEN.finditer(reply)}
    assert leaked == set(), f"the agent was shown {sorted(leaked)}"
    run = await runtime.get_run(run_id, tenant)
    assert run is not None and run.result is not None
    if case.code is not None:
        assert run.result.code == case.code
    assert FORBIDDEN.search(run.model_dump_json()) is None  # nothing stored to replay later
    audit, details = await _audit_text(store, run_id)
    assert SECRET not in audit
    assert any(all(part in detail for part in REDACTED) for detail in details), details


def _run_id(result: dict[str, Any]) -> str:
    if result.get("resultType") == "task":
        task_id: str = result["taskId"]
        return task_id.rpartition(".")[0]
    run_id: str = result["structuredContent"]["run_id"]
    return run_id


async def test_an_upstreams_reason_phrase_reaches_the_audit_trail_and_never_the_agent(
    store: Store,
) -> None:
    upstream = _Upstream()
    url = await upstream.start()
    executor = HttpExecutor(url=url)
    registry = ActionRegistry(
        [
            definition(
                executor,
                approval=NO_APPROVAL,
                executor_idempotent=True,
                retry=RetrySpec(attempts=2, backoff=timedelta(seconds=1)),
                executor_codes=executor.declared_codes,
            )
        ]
    )
    runtime = Runtime(registry, store, sleep=_no_sleep)
    case = Case("upstream reason phrase", {}, SMALL, code="HTTP_SERVER_ERROR")
    await _exercise(case, runtime, store, upstream)
