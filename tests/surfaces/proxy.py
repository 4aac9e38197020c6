"""A loopback round-robin TCP proxy: connection ``n`` goes to backend ``n % len(backends)``.

Like a load balancer without session affinity. Clients that open one connection per request
(no keep-alive) therefore alternate between backends deterministically; ``routed`` records
where each connection went, and ``accepted`` lets a test wait until a request has been routed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tests.surfaces.support import free_socket


@dataclass
class RoundRobin:
    backends: Sequence[int]
    routed: list[int] = field(default_factory=list)
    accepted: asyncio.Condition = field(default_factory=asyncio.Condition)
    _pipes: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.routed) % len(self.backends)
        async with self.accepted:
            self.routed.append(index)
            self.accepted.notify_all()
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backends[index])
        except OSError:
            writer.close()
            return
        pipes = [
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer)),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.gather(*pipes)
        finally:
            self._pipes.difference_update(pipes)

    async def until_routed(self, count: int, timeout: float) -> None:
        """Wait until ``count`` connections have been routed."""
        async with self.accepted:
            await asyncio.wait_for(
                self.accepted.wait_for(lambda: len(self.routed) >= count), timeout
            )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@asynccontextmanager
async def round_robin(backends: Sequence[int]) -> AsyncIterator[tuple[str, RoundRobin]]:
    """Serve the proxy on a loopback port; yields its base URL and the router."""
    router = RoundRobin(backends)
    sock = free_socket()
    server = await asyncio.start_server(router.handle, sock=sock)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", router
    finally:
        server.close()
        for pipe in list(router._pipes):
            pipe.cancel()
        await asyncio.gather(*router._pipes, return_exceptions=True)
        await server.wait_closed()
