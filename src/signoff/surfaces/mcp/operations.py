"""Context-tier MCP middleware for operators: in-flight accounting (graceful shutdown) and the
``mcp.server.operation.duration`` histogram of the OpenTelemetry MCP conventions.

The SDK's own ``OpenTelemetryMiddleware`` (installed by ``Server``) makes the server span; this
measures the same request for Prometheus, with ``error.type`` as the conventions define it: the
JSON-RPC error code, ``tool_error`` for a tool result with ``isError``, or the exception type.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from signoff.observability.labels import UNKNOWN, json_rpc_error, one_of
from signoff.observability.metrics import METRICS, Metrics
from signoff.surfaces.draining import Draining

# Long-lived by design: a shutdown does not wait for them.
_STREAMS = frozenset({"subscriptions/listen"})
# Label values come from this list (or "unknown"), so a client cannot grow the label set.
_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "subscriptions/listen",
        "tasks/get",
        "tasks/cancel",
        "tasks/update",
    }
)


class OperationsMiddleware:
    """``known_tool``: whether a name is one of this server's tools (others are labelled
    ``unknown``: tool names come from clients)."""

    def __init__(
        self,
        known_tool: Callable[[str], bool],
        draining: Draining | None = None,
        metrics: Metrics = METRICS,
    ) -> None:
        self.known_tool = known_tool
        self.draining = draining
        self.metrics = metrics

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if self.draining is None or ctx.method in _STREAMS or ctx.request_id is None:
            return await self._measured(ctx, call_next)
        async with self.draining.call():
            return await self._measured(ctx, call_next)

    async def _measured(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None:  # a notification: no operation to time
            return await call_next(ctx)
        method = one_of(ctx.method, _METHODS)
        tool = ""
        if method == "tools/call":
            name = ctx.params.get("name") if ctx.params else None
            known = isinstance(name, str) and len(name) <= 64 and self.known_tool(name)
            tool = name if known and isinstance(name, str) else UNKNOWN
        error = ""
        started = time.perf_counter()
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            error = json_rpc_error(exc.error.code)
            raise
        except Exception as exc:
            error = str(types.INVALID_PARAMS) if _is_validation(exc) else type(exc).__qualname__
            raise
        else:
            if ctx.method == "tools/call" and _is_tool_error(result):
                error = "tool_error"
            return result
        finally:
            self.metrics.mcp_operation.labels(
                mcp_method_name=method, gen_ai_tool_name=tool, error_type=error
            ).observe(time.perf_counter() - started)


def _is_tool_error(result: HandlerResult) -> bool:
    match result:
        case types.CallToolResult(is_error=True) | {"isError": True}:
            return True
        case _:
            return False


def _is_validation(exc: Exception) -> bool:
    from pydantic import ValidationError

    return isinstance(exc, ValidationError)
