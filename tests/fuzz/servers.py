"""The real ``signoff serve`` (HTTP and stdio) on one database, driven line by line.

Both servers are subprocesses of the installed CLI over ``tests/fuzz/manifests``; the clients here
are synchronous so a hypothesis test can drive them and check the database between batches.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from signoff.surfaces.access.jwt import issue_token
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "tests" / "fuzz" / "manifests"
SIGNOFF = str(Path(sys.executable).with_name("signoff"))
JWT_SECRET = "fuzz-jwt-secret-that-is-long-enough-0123456789"
FUZZ_SECRET = "Fz-pl4nted-s3cret-9d1e"
TENANT = "fuzz"
DEADLINE = 30.0
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        FUZZ_SECRET=FUZZ_SECRET,
        SIGNOFF_JWT_SECRET=JWT_SECRET,
        SIGNOFF_PRINCIPAL="fuzz-agent",
        SIGNOFF_TENANT=TENANT,
        SIGNOFF_ROLES="fuzzer",
    )
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answer_from(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC answer in a JSON or SSE body (``AssertionError`` when there is none)."""
    kind = response.headers.get("content-type", "")
    bodies: list[str] = []
    if kind.startswith("text/event-stream"):
        bodies = [
            line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")
        ]
    else:
        bodies = [response.text]
    for body in bodies:
        try:
            message = json.loads(body)
        except ValueError:
            continue
        answered = isinstance(message, dict) and ("result" in message or "error" in message)
        if answered and message.get("id") in (request_id, None):
            return dict(message)
    raise AssertionError(f"no JSON-RPC answer (HTTP {response.status_code}): {response.text[:300]}")


class HttpServer:
    """``signoff serve --transport http`` and a client speaking both protocol eras."""

    def __init__(self, database: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                SIGNOFF,
                "serve",
                "--transport",
                "http",
                "--port",
                str(self.port),
                "--database",
                database,
                "--manifests",
                str(MANIFESTS),
                "--log-level",
                "warning",
                "--no-reload",
            ],
            cwd=str(ROOT),
            env=server_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        token = issue_token(JWT_SECRET, "fuzz-agent", TENANT, ["fuzzer"], scopes=[DEFAULT_PROPOSE])
        self.http = httpx.Client(
            base_url=self.url, timeout=DEADLINE, headers={"Authorization": f"Bearer {token}"}
        )
        self._wait_ready()
        self._next = 0
        self.session = self._initialize()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                self.http.get("/.well-known/oauth-protected-resource/mcp")
                return
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("signoff serve --transport http did not start") from None
                time.sleep(0.1)

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def _initialize(self) -> str:
        params = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "f", "version": "0"},
        }
        response = self.post_legacy(self.body("initialize", params), None)
        session = response.headers["mcp-session-id"]
        self.http.post(
            "/mcp",
            content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            headers=self._headers(LEGACY, session),
        )
        return session

    def body(self, method: str, params: dict[str, Any], request_id: int | None = None) -> str:
        ident = request_id if request_id is not None else self.new_id()
        return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})

    @staticmethod
    def _headers(version: str, session: str | None, **extra: str) -> dict[str, str]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": version,
            **extra,
        }
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return headers

    def post_legacy(self, text: str | bytes, session: str | None = "") -> httpx.Response:
        chosen = self.session if session == "" else session
        return self.http.post("/mcp", content=text, headers=self._headers(LEGACY, chosen))

    def post_modern(self, text: str | bytes, method: str, name: str | None) -> httpx.Response:
        extra = {"Mcp-Method": method}
        if name is not None and name.isascii() and name.isprintable():
            extra["Mcp-Name"] = name
        return self.http.post("/mcp", content=text, headers=self._headers(MODERN, None, **extra))

    def close(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class StdioServer:
    """``signoff serve --transport stdio``: raw lines in, answers matched by id."""

    def __init__(self, database: str) -> None:
        self.process = subprocess.Popen(
            [
                SIGNOFF,
                "serve",
                "--transport",
                "stdio",
                "--database",
                database,
                "--manifests",
                str(MANIFESTS),
                "--no-reload",
            ],
            cwd=str(ROOT),
            env=server_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next = 10_000
        params = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "f", "version": "0"},
        }
        ident = self.new_id()
        first = self.call(
            ident,
            json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}),
        )
        assert "result" in first, first
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def send(self, text: str | bytes) -> None:
        assert self.process.stdin is not None
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        self.process.stdin.write(data.replace(b"\n", b" ") + b"\n")
        self.process.stdin.flush()

    def call(self, request_id: int, text: str | bytes) -> dict[str, Any]:
        self.send(text)
        deadline = time.monotonic() + DEADLINE
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"stdio: no answer to request {request_id}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            message = json.loads(line)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return dict(message)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(DEADLINE)
        self.process.stdout.close()
