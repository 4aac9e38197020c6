"""``SignoffMCP``: a low-level MCP ``Server`` over a ``Runtime`` — every action a tool.

A tool call becomes an ``ActionProposal`` (identity from the session, ``channel=mcp``,
``proposer_type=agent``, ``idempotency_key`` lifted out of the arguments) and the pipeline's
``ActionOutcome`` comes back as the tool result. The SDK validates nothing against the advertised
schemas, so a malformed call still reaches the pipeline and gets a run, a code and an audit entry.
Domain refusals are tool results with ``is_error``; only protocol faults (no identity, an
unreadable resource URI) are JSON-RPC errors.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema_rs
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from signoff import __version__
from signoff.core.codes import Code
from signoff.core.confirmer import Confirmer
from signoff.core.definition import tool_name
from signoff.core.identity import Channel, ProposerType
from signoff.core.input_limits import safe_text
from signoff.core.proposal import ActionProposal
from signoff.core.results import ActionOutcome
from signoff.core.runtime import Runtime
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp import confirm, tools
from signoff.surfaces.mcp.confirm import SessionConfirmer
from signoff.surfaces.mcp.identity import Identify
from signoff.surfaces.mcp.operations import OperationsMiddleware
from signoff.surfaces.mcp.runs import RunQueries
from signoff.surfaces.mcp.tasks import TaskIds, Tasks, declared

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "signoff governs business actions. Each tool proposes one action; the result says what "
    "happened: status (SUCCEEDED, FAILED, DENIED, VALIDATION_FAILED, PENDING_APPROVAL, "
    "ACCEPTED, CANCELLED), a stable code and a retry disposition. PENDING_APPROVAL and ACCEPTED "
    "are not final: follow them with signoff_get_run (wait_seconds up to 30). Decide on "
    "status/code/retry, not on the message. Retry only with the same idempotency_key."
)

Builtin = Callable[[Caller, dict[str, Any]], Awaitable[tuple[BaseModel, bool]]]


class _Server(Server[Any]):
    """Advertises ``tools.listChanged`` on every transport (the HTTP session manager builds
    its initialisation options itself)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class SignoffMCP:
    """The MCP surface of one runtime. ``identify`` says who each request comes from."""

    def __init__(
        self,
        runtime: Runtime,
        identify: Identify,
        *,
        name: str = "signoff",
        task_secret: bytes | None = None,
        draining: Draining | None = None,
    ) -> None:
        """``task_secret`` keys task ids; share it between instances and keep it across restarts
        (without it a random one is used, valid for this process only)."""
        self.runtime = runtime
        self._identify = identify
        self._runs = RunQueries(runtime, draining)
        self._bus = InMemorySubscriptionBus()
        self._legacy_connections: set[Connection] = set()
        self._warned: set[str] = set()
        self._builtin_tools = {tool.name: tool for tool in tools.builtin_tools()}
        self._builtin_validators = {
            name: jsonschema_rs.Draft202012Validator(tool.input_schema)
            for name, tool in self._builtin_tools.items()
        }
        self._builtins: dict[str, Builtin] = {
            tools.GET_RUN: self._get_run,
            tools.CANCEL_RUN: self._cancel_run,
            tools.LIST_RUNS: self._list_runs,
        }
        self.server: Server[Any] = _Server(
            name,
            version=__version__,
            title="signoff",
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        # Registered directly: to a client that declared the tasks extension, a call may answer
        # a CreateTaskResult instead of a CallToolResult (``on_call_tool`` types only the latter).
        self.server.add_request_handler("tools/call", types.CallToolRequestParams, self._call_tool)
        self.server.middleware.append(self._track_legacy_connection)
        ids = TaskIds(task_secret if task_secret is not None else secrets.token_bytes(32))
        self._ids = ids
        self._tasks = Tasks(runtime, self._runs, ids, self._caller, _outcome_result)
        self._tasks.register(self.server)
        self.server.middleware.append(OperationsMiddleware(self._is_tool, draining))

    # ------------------------------------------------------------------ identity
    def _caller(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        caller = self._identify(ctx)
        if caller is None:
            raise MCPError(code=types.INVALID_REQUEST, message="Authentication required.")
        return caller

    # --------------------------------------------------------------------- tools
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = self._caller(ctx)
        listed = [
            tools.action_tool(action)
            for action in self.runtime.actions()
            if tools.visible_to(action, caller.principal) and not self._shadowed(action.id)
        ]
        listed.extend(self._builtin_tools.values())
        # The list depends on the caller's roles and on reloads: never cache it across callers.
        return types.ListToolsResult(tools=listed, ttl_ms=0, cache_scope="private")

    def _shadowed(self, action_id: str) -> bool:
        """An action named like a built-in tool is unreachable: the built-in answers that name."""
        if tool_name(action_id) in self._builtins:
            if action_id not in self._warned:
                self._warned.add(action_id)
                logger.warning("action %r is shadowed by signoff's built-in tool", action_id)
            return True
        return False

    def _is_tool(self, name: str) -> bool:
        return name in self._builtin_tools or self.runtime.action_for_tool(name) is not None

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """For the SDK's ``Mcp-Param-*`` header check only (no argument validation happens)."""
        if name in self._builtin_tools:
            return self._builtin_tools[name].input_schema
        action = self.runtime.action_for_tool(name)
        return action.definition.input_schema if action is not None else None

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        caller = self._caller(ctx)
        arguments = dict(params.arguments or {})
        builtin = self._builtins.get(params.name)
        if builtin is not None:
            errors = sorted(
                self._builtin_validators[params.name].iter_errors(arguments),
                key=lambda e: [str(p) for p in e.instance_path],
            )
            if errors:
                where = "/" + "/".join(str(p) for p in errors[0].instance_path)
                refusal = tools.invalid_arguments(params.name, f"{where}: {errors[0].message}")
                if params.name == tools.LIST_RUNS:
                    listing = tools.RunList(runs=[], code=refusal.code, message=refusal.message)
                    return _tool_result(listing, is_error=True)
                return _tool_result(refusal, is_error=True)
            try:
                model, is_error = await builtin(caller, arguments)
            except Exception:
                # A store fault: the SDK would send the exception's text (SQL, parameters).
                logger.exception("%s failed", params.name)
                return _tool_result(tools.runtime_failure(params.name), is_error=True)
            return _tool_result(model, is_error=is_error)
        action = self.runtime.action_for_tool(params.name)
        # An unknown name goes to the pipeline as it is: it records ACTION_NOT_REGISTERED.
        action_id = action.id if action is not None else params.name
        handle = confirm.opened_state(params.request_state)
        if handle is not None:  # a 2026-07-28 retry answering our confirmation form
            outcome = await confirm.answered(
                self.runtime, self._runs, self._ids, caller, handle, params
            )
        else:
            outcome = await self.propose(caller, action_id, arguments, SessionConfirmer(ctx))
        pending = outcome.code == Code.CONFIRMATION_REQUIRED
        if pending and confirm.modern(ctx) and confirm.can_elicit(ctx):
            request = await self.runtime.confirmation_request(
                outcome.run_id, caller.tenant_id, caller.principal
            )
            if request is not None:
                state = self._ids.issue(caller.tenant_id, outcome.run_id)
                return confirm.input_required(request, state)
        return await self._answer(ctx, caller, outcome)

    async def _answer(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, outcome: ActionOutcome
    ) -> types.CallToolResult | dict[str, Any]:
        if not outcome.status.is_final and outcome.run_id and declared(ctx):
            # The run is committed (the runtime answers only after that): hand out its task.
            return await self._tasks.created(caller, outcome)
        return _tool_result(outcome, is_error=outcome.is_error)

    async def propose(
        self,
        caller: Caller,
        action_id: str,
        arguments: dict[str, Any],
        confirmer: Confirmer | None = None,
    ) -> ActionOutcome:
        """Hand one tool call to the pipeline; the runtime finishes it even if the client leaves."""
        if len(action_id) > 255:
            raise MCPError(code=types.INVALID_PARAMS, message="Unknown tool.")
        key = arguments.pop(tools.IDEMPOTENCY_KEY, None)
        if key is not None and not isinstance(key, str):
            # Not a string: hand over a key the contract can never accept, so the pipeline
            # records the refusal (IDEMPOTENCY_KEY_INVALID) like any other invalid call.
            key = ""
        # A lone surrogate cannot even be held by a proposal; show it escaped instead, so the
        # call is still recorded and refused (only in-process clients can send one).
        action_id, key = _encodable(action_id), _encodable(key) if key is not None else None
        proposal = ActionProposal(
            action_id=action_id,
            input=arguments,
            principal=caller.principal,
            tenant_id=caller.tenant_id,
            channel=Channel.MCP,
            proposer_type=ProposerType.AGENT,
            idempotency_key=key,
        )
        return await self.runtime.propose(proposal, confirmer)

    async def _get_run(self, caller: Caller, arguments: dict[str, Any]) -> tuple[BaseModel, bool]:
        outcome = await self._runs.get(
            caller, arguments["run_id"], float(arguments.get("wait_seconds", 0))
        )
        return outcome, outcome.is_error

    async def _cancel_run(
        self, caller: Caller, arguments: dict[str, Any]
    ) -> tuple[BaseModel, bool]:
        outcome = await self._runs.cancel(caller, arguments["run_id"])
        return outcome, outcome.is_error

    async def _list_runs(self, caller: Caller, arguments: dict[str, Any]) -> tuple[BaseModel, bool]:
        listing = await self._runs.list(
            caller,
            status=arguments.get("status"),
            limit=int(arguments.get("limit", 20)),
            before=arguments.get("before"),
        )
        return listing, False

    # ----------------------------------------------------------------- resources
    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller = self._caller(ctx)
        try:
            listing = await self._runs.list(caller, status=None, limit=20, before=None)
        except Exception as exc:
            raise _internal("resources/list") from exc
        resources = [
            types.Resource(
                uri=tools.RUN_URI_PREFIX + outcome.run_id,
                name=f"run {outcome.run_id}",
                title=f"{outcome.action}: {outcome.status}",
                mime_type="application/json",
            )
            for outcome in listing.runs
        ]
        return types.ListResourcesResult(resources=resources, ttl_ms=0, cache_scope="private")

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self._caller(ctx)
        template = types.ResourceTemplate(
            name="run",
            title="A signoff run",
            uri_template=tools.RUN_URI_TEMPLATE,
            description="The current outcome of one run in your tenant (same object as signoff_get_run).",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        caller = self._caller(ctx)
        uri = str(params.uri)
        run_id = (
            uri.removeprefix(tools.RUN_URI_PREFIX) if uri.startswith(tools.RUN_URI_PREFIX) else ""
        )
        try:
            outcome = await self._runs.find(caller, run_id) if run_id else None
        except Exception as exc:
            raise _internal("resources/read") from exc
        if outcome is None:
            # A run of another tenant reads exactly like one that does not exist.
            raise MCPError(
                code=types.INVALID_PARAMS,
                message="Resource not found.",
                data={"uri": safe_text(uri, 300)},
            )
        text = outcome.model_dump_json()
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        return types.ReadResourceResult(contents=[contents], ttl_ms=0, cache_scope="private")

    # -------------------------------------------------------- tools/list_changed
    async def _track_legacy_connection(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[HandlerResult]],
    ) -> HandlerResult:
        """Remember handshake-era connections so a reload can tell them the tools changed.

        2026-07-28 clients subscribe with ``subscriptions/listen`` instead (the bus). The SDK has
        no public hook for "a connection opened", so this reads the session's connection.
        """
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = getattr(ctx.session, "_connection", None)
            if (
                isinstance(connection, Connection)
                and connection.has_standalone_channel
                and connection not in self._legacy_connections
            ):
                self._legacy_connections.add(connection)
                connection.exit_stack.callback(self._legacy_connections.discard, connection)
        return await call_next(ctx)

    async def notify_tools_changed(self) -> None:
        """Tell connected clients to re-list tools (call after the registry was reloaded)."""
        await self._bus.publish(ToolsListChanged())
        for connection in list(self._legacy_connections):
            await connection.notify("notifications/tools/list_changed", None)


def _encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return safe_text(text, 255)
    return text


def _internal(operation: str) -> MCPError:
    """A fault inside signoff, as a JSON-RPC error without its text; the log has the detail."""
    logger.exception("%s failed", operation)
    return MCPError(
        code=types.INTERNAL_ERROR,
        message=f"signoff could not answer this request [{Code.ACTION_RUNTIME_FAILED}].",
        data={"code": Code.ACTION_RUNTIME_FAILED},
    )


def _outcome_result(outcome: ActionOutcome) -> dict[str, Any]:
    """The tool result of ``outcome`` in wire form (what a task's ``result`` carries)."""
    result = _tool_result(outcome, is_error=outcome.is_error)
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _tool_result(model: BaseModel, *, is_error: bool) -> types.CallToolResult:
    data = model.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=data,
        is_error=is_error,
    )
