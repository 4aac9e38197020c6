"""Run the MCP surface: one stdio connection, or uvicorn serving the HTTP app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from starlette.types import ASGIApp

from signoff.surfaces.draining import DEFAULT_GRACE, Draining
from signoff.surfaces.mcp.server import SignoffMCP
from signoff.surfaces.mcp.stdio_guard import screen

log = logging.getLogger("signoff.shutdown")
# After the calls in flight answered: how long their responses may take to reach the clients
# before idle streams (GET /mcp, subscriptions/listen) are closed.
FLUSH_SECONDS = 1.0


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
    app: ASGIApp,
    host: str,
    port: int,
    *,
    log_level: str = "info",
    draining: Draining | None = None,
    grace: float = DEFAULT_GRACE,
    own_logging: bool = False,
    on_started: Callable[[], None] | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app``; with ``draining``, one that shuts down gracefully.

    ``own_logging``: the process configured logging (``signoff.observability.logs``), so uvicorn
    installs no handlers of its own and its lines come out in the same format."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None if own_logging else uvicorn.config.LOGGING_CONFIG,
        lifespan="on",
        ws="none",
        proxy_headers=False,
        server_header=False,
    )
    if draining is None:
        return uvicorn.Server(config)
    return GracefulServer(config, draining, grace, on_started)


class GracefulServer(uvicorn.Server):
    """On SIGTERM or SIGINT: stop accepting connections, answer open long-polls with the run's
    current outcome, wait up to ``grace`` seconds for the calls in flight to answer, close what is
    left (idle streams, calls past the grace) and return, so the process exits 0."""

    def __init__(
        self,
        config: uvicorn.Config,
        draining: Draining,
        grace: float,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.draining = draining
        self.grace = grace
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # Serving, with SIGTERM and SIGINT handled: from here a signal is a graceful stop.
        if self.started and self.on_started is not None:
            self.on_started()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Like uvicorn's, except that the signal is not raised again after a graceful stop
        # (uvicorn re-raises it, so the process would end by SIGTERM instead of exiting 0).
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        self.draining.begin(deadline)
        in_flight = self.draining.in_flight
        log.info(
            "shutting down: stopped accepting; %d call(s) in flight, grace %g s",
            in_flight,
            self.grace,
            extra={"in_flight": in_flight, "grace_s": self.grace},
        )
        if not await self.draining.settled(self.grace):
            log.warning(
                "shutdown grace of %g s over: %d call(s) still running are cut off",
                self.grace,
                self.draining.in_flight,
                extra={"in_flight": self.draining.in_flight, "grace_s": self.grace},
            )
        # uvicorn hands it to asyncio.wait_for, which takes seconds as a float.
        flush = max(min(FLUSH_SECONDS, deadline - loop.time()), 0.0)
        self.config.timeout_graceful_shutdown = flush  # type: ignore[assignment]
        await super().shutdown(sockets=None)


async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    log_level: str = "info",
    sockets: list[socket.socket] | None = None,
    draining: Draining | None = None,
    grace: float = DEFAULT_GRACE,
    own_logging: bool = False,
    on_started: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C; with ``draining`` (the one ``app`` was built
    with), shut down gracefully within ``grace`` seconds, and call ``on_started`` once serving
    with the signals handled."""
    server = uvicorn_server(
        app,
        host,
        port,
        log_level=log_level,
        draining=draining,
        grace=grace,
        own_logging=own_logging,
        on_started=on_started,
    )
    await server.serve(sockets=sockets)
