"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) over durable runs.

A run *is* the task: nothing is stored for it. A 2026-07-28 request whose ``_meta`` client
capabilities declare the extension and whose call does not finish at once (waiting for approval,
background or external work) gets a ``CreateTaskResult`` instead of the outcome — only after the
runtime has committed the run, so a ``tasks/get`` on any instance resolves it. The task id is the
run id with an HMAC over tenant and run id: unguessable without the server's task secret, bound
to the tenant, and the same on every instance that shares the secret.

State mapping (contract §7):

====================================================  ===========  =======================
outcome                                               task status  carried
====================================================  ===========  =======================
PENDING_APPROVAL, ACCEPTED (waiting, running)         working      statusMessage
SUCCEEDED, FAILED, DENIED, VALIDATION_FAILED          completed    result (CallToolResult,
                                                                   isError as the outcome)
ACTION_RUNTIME_FAILED (signoff itself failed)         failed       error (-32603, the outcome
                                                                   as data)
CANCELLED                                             cancelled    statusMessage
====================================================  ===========  =======================

``tasks/get`` reads through the same visibility as ``signoff_get_run``; ``tasks/cancel`` is the
governed cancel. A task nobody may read answers -32602 exactly like one that does not exist.
``tasks/update`` acknowledges (signoff never asks the client for input). ``tasks/result`` and
``tasks/list`` are not served: -32601.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

from signoff.core.codes import Code, ExecutionStatus
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.mcp.runs import RunQueries

EXTENSION = "io.modelcontextprotocol/tasks"
APPROVAL_POLL_MS = 5_000
WORK_POLL_MS = 1_000
_MAC_CHARS = 32


class TaskParams(types.RequestParams):
    """``tasks/get`` / ``tasks/cancel`` / ``tasks/update`` params: the task id (and, for
    ``tasks/update``, input responses signoff never asks for)."""

    model_config = ConfigDict(extra="allow")

    taskId: str


class TaskIds:
    """Issue and open task ids: ``<run_id>.<HMAC-SHA256(secret, tenant, run_id)>``."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the task secret must be at least 16 bytes")
        self._key = hashlib.sha256(b"signoff task ids\0" + secret).digest()

    def _mac(self, tenant_id: str, run_id: str) -> str:
        message = f"{tenant_id}\0{run_id}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:_MAC_CHARS]

    def issue(self, tenant_id: str, run_id: str) -> str:
        return f"{run_id}.{self._mac(tenant_id, run_id)}"

    def open(self, tenant_id: str, task_id: str) -> str | None:
        """The run id of a task id issued for ``tenant_id``, else ``None``."""
        run_id, dot, mac = task_id.rpartition(".")
        if not dot or not run_id or len(task_id) > 200:
            return None
        return run_id if hmac.compare_digest(mac, self._mac(tenant_id, run_id)) else None


def task_secret_from_env(env: Mapping[str, str], jwt_secret: str | None = None) -> bytes | None:
    """``SIGNOFF_TASK_SECRET``, else the HS256 token secret (task ids derive their own key from
    it), else ``None``: then each process draws a random one and its task ids die with it."""
    configured = env.get("SIGNOFF_TASK_SECRET") or None
    if configured is not None:
        if len(configured.encode()) < 16:
            raise ValueError("SIGNOFF_TASK_SECRET must be at least 16 bytes")
        return configured.encode()
    return jwt_secret.encode() if jwt_secret else None


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """This request (2026-07-28, per-request capabilities) declares the tasks extension."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def check_routing(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Over HTTP, ``Mcp-Name`` must carry the task id (the header load balancers route on)."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return  # stdio, in-memory: no routing headers
    if headers.get("mcp-name") != task_id:
        raise MCPError(
            code=types.HEADER_MISMATCH,
            message="Mcp-Name header does not match the request's taskId",
        )


def not_found() -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message="Failed to retrieve task: Task not found")


def task_state(
    task_id: str, outcome: ActionOutcome, run: ActionRun, tool_result: dict[str, Any]
) -> dict[str, Any]:
    """The ``Task`` (wire form, camelCase) of a run in its current state."""
    status = outcome.status
    state: dict[str, Any] = {
        "taskId": task_id,
        "createdAt": _iso(run.created_at),
        "lastUpdatedAt": _iso(run.updated_at),
        "ttlMs": _ttl_ms(outcome, run),
    }
    if outcome.message:
        state["statusMessage"] = outcome.message
    if not status.is_final:
        waiting = status is ExecutionStatus.PENDING_APPROVAL
        state.update(status="working", pollIntervalMs=APPROVAL_POLL_MS if waiting else WORK_POLL_MS)
    elif status is ExecutionStatus.CANCELLED:
        state["status"] = "cancelled"
    elif outcome.code == Code.ACTION_RUNTIME_FAILED:
        state.update(
            status="failed",
            error={
                "code": types.INTERNAL_ERROR,
                "message": outcome.message or "signoff could not finish this run",
                "data": tool_result["structuredContent"],
            },
        )
    else:
        state.update(status="completed", result=tool_result)
    return state


def _ttl_ms(outcome: ActionOutcome, run: ActionRun) -> int | None:
    """Until the approval expires (or external work's deadline); unlimited otherwise: the run
    and its result are kept, so the task stays readable."""
    if outcome.status.is_final:
        return None
    ends: datetime | None = None
    if outcome.status is ExecutionStatus.PENDING_APPROVAL and outcome.approval is not None:
        ends = outcome.approval.expires_at
    elif run.deadline_at is not None:
        ends = run.deadline_at
    if ends is None:
        return None
    return max(int((ends - run.created_at).total_seconds() * 1000), 0)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


ToolResult = Callable[[ActionOutcome], dict[str, Any]]
CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]


class Tasks:
    """``tasks/get``, ``tasks/cancel`` and ``tasks/update`` on a server, and task creation."""

    def __init__(
        self, runtime: Runtime, runs: RunQueries, ids: TaskIds, caller_of: CallerOf,
        tool_result: ToolResult,
    ) -> None:  # fmt: skip
        self._runtime = runtime
        self._runs = runs
        self._ids = ids
        self._caller_of = caller_of
        self._tool_result = tool_result

    def register(self, server: Server[Any]) -> None:
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskParams, self._get)
        server.add_request_handler("tasks/cancel", TaskParams, self._cancel)
        server.add_request_handler("tasks/update", TaskParams, self._update)

    async def created(self, caller: Caller, outcome: ActionOutcome) -> dict[str, Any]:
        """The ``CreateTaskResult`` of a committed run that is not finished yet."""
        run = await self._stored(caller, outcome.run_id)
        if run is None:  # pragma: no cover - the runtime answered after committing it
            raise MCPError(code=types.INTERNAL_ERROR, message="The run was not recorded.")
        task_id = self._ids.issue(caller.tenant_id, outcome.run_id)
        state = task_state(task_id, outcome, run, self._tool_result(outcome))
        return {"resultType": "task", **state}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        caller, run_id = self._open(ctx, params)
        outcome = await self._runs.get(caller, run_id)
        found = outcome.code != Code.ACTION_RUN_NOT_FOUND
        run = await self._stored(caller, run_id) if found else None
        if run is None:
            raise not_found()
        return task_state(params.taskId, outcome, run, self._tool_result(outcome))

    async def _cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        """The governed cancel; acknowledged even when the run is past cancelling (cooperative)."""
        caller, run_id = self._open(ctx, params)
        outcome = await self._runs.cancel(caller, run_id)
        if outcome.code == Code.ACTION_RUN_NOT_FOUND:
            raise not_found()
        return {}

    async def _update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        """signoff never asks for input, so there is never an outstanding key: acknowledge."""
        caller, run_id = self._open(ctx, params)
        if (await self._runs.get(caller, run_id)).code == Code.ACTION_RUN_NOT_FOUND:
            raise not_found()
        return {}

    def _open(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> tuple[Caller, str]:
        check_routing(ctx, params.taskId)
        caller = self._caller_of(ctx)
        run_id = self._ids.open(caller.tenant_id, params.taskId)
        if run_id is None:
            raise not_found()
        return caller, run_id

    async def _stored(self, caller: Caller, run_id: str) -> ActionRun | None:
        """The run as this caller may read it (``core.visibility``), sensitive values masked."""
        return await self._runtime.get_run(run_id, caller.tenant_id, reader=caller.reader())
