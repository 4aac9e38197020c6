"""A raw line-level stdio client: send any bytes as a JSON-RPC line, read answers by id.

``mcp.Client`` cannot send what a hostile client sends (a 200-deep request, invalid UTF-8, a lone
surrogate in a tool name), so these tests speak the wire format themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 20.0
LEGACY_VERSION = "2025-11-25"


class RawStdio:
    def __init__(self, **identity: str) -> None:
        self._identity = {
            "SIGNOFF_PRINCIPAL": "agent-1",
            "SIGNOFF_TENANT": "acme",
            "SIGNOFF_ROLES": "billing",
            **identity,
        }
        self._process: asyncio.subprocess.Process | None = None
        self._next_id = 100

    async def __aenter__(self) -> RawStdio:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self._identity}
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.surfaces.stdio_server",
            cwd=str(ROOT),
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=64 * 1024 * 1024,
        )
        answer = await self.call(
            "initialize",
            {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert "result" in answer, answer
        await self.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process = self._process
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), DEADLINE)
        except TimeoutError:
            process.kill()
            await process.wait()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send_line(self, line: str | bytes) -> None:
        assert self._process is not None and self._process.stdin is not None
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        self._process.stdin.write(data.rstrip(b"\n") + b"\n")
        await self._process.stdin.drain()

    async def answer_to(self, request_id: Any) -> dict[str, Any]:
        """The next answer carrying ``request_id`` (notifications in between are skipped)."""
        assert self._process is not None and self._process.stdout is not None
        while True:
            line = await asyncio.wait_for(self._process.stdout.readline(), DEADLINE)
            if not line:
                raise AssertionError("the server closed stdout without answering")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.new_id()
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send_line(json.dumps(body))
        return await self.answer_to(request_id)

    async def raw_call(self, request_id: int, text: str | bytes) -> dict[str, Any]:
        """Send ``text`` (which must carry ``"id": request_id``) and wait for its answer."""
        await self.send_line(text)
        return await self.answer_to(request_id)
