"""A signoff HTTP server for the SIGTERM test: one action that blocks until told to finish.

Run as ``python -m tests.ops.graceful_app GRACE``. Prints ``port N`` once listening,
``started`` when the blocking executor is entered, ``long-poll waiting`` when a long-poll is
open, and ``exited`` after a clean stop. A line on stdin lets the blocked executor return.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from signoff import ExecutionContext
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.core.visibility import Reader
from signoff.observability.logs import configure_logging
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import make_caller
from signoff.surfaces.draining import Draining
from signoff.surfaces.mcp.http import FixedIdentity, HttpOptions, build_http_app
from signoff.surfaces.mcp.serving import serve_http
from tests.helpers import Recorder, definition
from tests.surfaces.support import free_socket, lookup_definition


def blocking(_context: ExecutionContext) -> dict[str, Any]:
    print("started", flush=True)
    sys.stdin.readline()
    return {"finished": True}


class WatchedRuntime(Runtime):
    async def wait(
        self, run_id: str, tenant_id: str, timeout: float, *, reader: Reader | None = None
    ) -> Any:
        print("long-poll waiting", flush=True)
        return await super().wait(run_id, tenant_id, timeout, reader=reader)


async def main(grace: float) -> None:
    registry = ActionRegistry([definition(Recorder()), lookup_definition(blocking, id="slow.op")])
    runtime = WatchedRuntime(registry, InMemoryStore())
    draining = Draining()
    caller = make_caller("agent-1", "acme", "billing")
    app = build_http_app(
        runtime, FixedIdentity(caller, "127.0.0.1"), HttpOptions(draining=draining)
    )
    sock = free_socket()
    print(f"port {sock.getsockname()[1]}", flush=True)
    await serve_http(
        app,
        "127.0.0.1",
        0,
        sockets=[sock],
        draining=draining,
        grace=grace,
        log_level="info",
        own_logging=True,
    )
    await runtime.drain()
    print("exited", flush=True)


if __name__ == "__main__":
    configure_logging("json", "info")
    asyncio.run(main(float(sys.argv[1])))
