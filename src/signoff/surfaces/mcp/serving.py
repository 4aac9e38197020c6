"""Run the MCP surface: one stdio connection, or uvicorn serving the HTTP app."""

from __future__ import annotations

import socket

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from starlette.types import ASGIApp

from signoff.surfaces.mcp.server import SignoffMCP
from signoff.surfaces.mcp.stdio_guard import screen


async def serve_stdio(surface: SignoffMCP) -> None:
    """Serve one client on stdin/stdout until it closes the pipe.

    Build ``surface`` with ``fixed_identity(caller)``: the launch identity is the only one.
    """
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as group:
            # Unreadable lines are answered here, not dropped (``stdio_guard``).
            group.start_soon(screen, read_stream, send, write_stream)
            await surface.server.run(
                receive, write_stream, surface.server.create_initialization_options()
            )


def uvicorn_server(
    app: ASGIApp, host: str, port: int, *, log_level: str = "info"
) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        ws="none",
        proxy_headers=False,
        server_header=False,
    )
    return uvicorn.Server(config)


async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    log_level: str = "info",
    sockets: list[socket.socket] | None = None,
) -> None:
    """Serve ``app`` until interrupted (Ctrl-C / SIGTERM)."""
    await uvicorn_server(app, host, port, log_level=log_level).serve(sockets=sockets)
