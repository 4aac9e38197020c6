"""A real HTTP server on 127.0.0.1 for executor tests: it records every request it receives."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False
    drop: bool = False
    """Close the connection without answering (the request did arrive)."""


Route = Callable[[Seen], Reply]


@dataclass
class Loopback:
    """``routes`` maps the last path segment to an answer; ``seen`` lists what arrived."""

    routes: dict[str, Route]
    base: str = ""
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    """Set once the first request has been recorded in ``seen``."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


def _not_found(_: Seen) -> Reply:
    return Reply(404, b"{}")


def _handler(server: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            seen = Seen(
                self.command,
                self.path,
                dict(self.headers),
                self.rfile.read(length) if length else b"",
            )
            with server.lock:
                server.seen.append(seen)
            server.arrived.set()
            route = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            reply = server.routes.get(route, _not_found)(seen)
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.chunked:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(reply.body), 1024):
                    chunk = reply.body[start : start + 1024]
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler


@contextmanager
def serving(routes: dict[str, Route]) -> Iterator[Loopback]:
    """Serve ``routes`` on a free loopback port until the block ends."""
    loopback = Loopback(routes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(loopback))
    server.daemon_threads = True
    loopback.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield loopback
    finally:
        loopback.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that is bound but not listening: connecting is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
