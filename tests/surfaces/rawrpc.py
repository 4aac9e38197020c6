"""Raw JSON-RPC over streamable HTTP at protocol 2026-07-28: one self-contained POST per request.

What an MCP host that is not the Python SDK sends: the per-request envelope in ``params._meta``,
the ``MCP-Protocol-Version`` / ``Mcp-Method`` / ``Mcp-Name`` routing headers, and nothing that ties
one request to the next (no handshake, no ``Mcp-Session-Id``).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import httpx2

MODERN = "2026-07-28"
_NAME_PARAM = {
    "tools/call": "name",
    "resources/read": "uri",
    "prompts/get": "name",
    # The tasks extension: Mcp-Name carries the task id, so a load balancer can route on it.
    "tasks/get": "taskId",
    "tasks/cancel": "taskId",
    "tasks/update": "taskId",
}
_ids = itertools.count(1)


@dataclass
class RawClient:
    """Posts JSON-RPC requests to ``url + /mcp`` as one client with ``capabilities``."""

    http: httpx2.AsyncClient
    url: str
    token: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)

    async def post(
        self, method: str, params: dict[str, Any] | None = None, *, name: str | None = None
    ) -> httpx2.Response:
        """The HTTP response to one request; ``name`` overrides the ``Mcp-Name`` header."""
        body_params = dict(params or {})
        body_params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-probe", "version": "0"},
            **body_params.get("_meta", {}),
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        routed = name if name is not None else body_params.get(_NAME_PARAM.get(method, ""))
        if isinstance(routed, str):
            headers["Mcp-Name"] = routed
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": body_params}
        return await self.http.post(self.url + "/mcp", json=body, headers=headers)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, name: str | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC reply object (``result`` or ``error``) of one request."""
        response = await self.post(method, params, name=name)
        return reply_of(response)


def reply_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC reply in a JSON body or in the last ``data:`` line of an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        replies = [json.loads(item) for item in data if item]
        replies = [reply for reply in replies if "id" in reply]
        assert replies, response.text
        reply: dict[str, Any] = replies[-1]
        return reply
    decoded: dict[str, Any] = response.json()
    return decoded
