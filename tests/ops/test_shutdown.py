"""SIGTERM on a real server process: stop accepting, answer long-polls at once, finish calls in
flight within the grace, exit 0."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from pathlib import Path

import pytest

from signoff import Code, ExecutionStatus
from tests.surfaces.support import DEADLINE, http_client

ROOT = Path(__file__).resolve().parents[2]
LARGE = {"invoice_id": "INV-2", "amount": 5000, "idempotency_key": "k-2"}

pytestmark = pytest.mark.slow


async def _line(stream: asyncio.StreamReader, wanted: str) -> str:
    """The next stdout line starting with ``wanted`` (log lines go to stderr)."""
    async with asyncio.timeout(DEADLINE):
        while True:
            raw = await stream.readline()
            if not raw:
                raise AssertionError(f"the server exited before printing {wanted!r}")
            line = raw.decode().strip()
            if line.startswith(wanted):
                return line


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


async def test_sigterm_answers_the_long_poll_at_once_finishes_the_call_in_flight_and_exits_0() -> (
    None
):
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.ops.graceful_app",
        "20",
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None and process.stderr is not None
    try:
        port = int((await _line(process.stdout, "port ")).split()[1])
        url = f"http://127.0.0.1:{port}"
        async with http_client(url, None) as agent, http_client(url, None) as poller:
            # The client checks results against the listed output schemas: list them now, a
            # server that is shutting down accepts no new connection for it later.
            await agent.list_tools()
            await poller.list_tools()
            in_flight = asyncio.create_task(agent.call_tool("slow_op", {"invoice_id": "INV-1"}))
            await _line(process.stdout, "started")
            pending = await poller.call_tool("invoice_cancel", LARGE)
            assert pending.structured_content is not None
            run_id = pending.structured_content["run_id"]
            poll = asyncio.create_task(
                poller.call_tool("signoff_get_run", {"run_id": run_id, "wait_seconds": 30})
            )
            await _line(process.stdout, "long-poll waiting")

            process.send_signal(signal.SIGTERM)
            answered = await asyncio.wait_for(poll, DEADLINE)
            # The long-poll answered while the call in flight is still blocked in its executor.
            assert not in_flight.done()
            assert answered.structured_content is not None
            assert answered.structured_content["status"] == ExecutionStatus.PENDING_APPROVAL
            assert answered.structured_content["run_id"] == run_id
            assert _refuses_connections(port)

            process.stdin.write(b"finish\n")
            await process.stdin.drain()
            finished = await asyncio.wait_for(in_flight, DEADLINE)
        assert finished.structured_content is not None
        assert finished.structured_content["code"] == Code.SUCCEEDED
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 0
        assert "exited" in (await process.stdout.read()).decode()
        logs = [json.loads(line) for line in (await process.stderr.read()).decode().splitlines()]
        shutdown = [entry for entry in logs if entry["logger"] == "signoff.shutdown"]
        assert shutdown and shutdown[0]["in_flight"] >= 1
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
