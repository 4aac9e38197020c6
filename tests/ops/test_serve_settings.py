"""`signoff serve` takes every setting from the environment, logs JSON to stderr, serves the
operator endpoints and exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx2
import pytest
from pydantic import ValidationError

from signoff.cli.serve_settings import ServeSettings, Transport, settings_problem
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.observability.logs import LogFormat
from tests.surfaces.support import DEADLINE, free_socket

ROOT = Path(__file__).resolve().parents[2]
SIGNOFF = str(Path(sys.executable).parent / "signoff")


def test_the_command_line_wins_over_the_environment_which_wins_over_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_PORT", "8001")
    monkeypatch.setenv("SIGNOFF_LOG_FORMAT", "json")
    monkeypatch.setenv("SIGNOFF_SHUTDOWN_GRACE", "5")
    from_env = ServeSettings.resolve(port=None, host=None)
    given = ServeSettings.resolve(port=9000, log_format=LogFormat.TEXT)
    assert (from_env.port, from_env.log_format, from_env.shutdown_grace) == (8001, "json", 5.0)
    assert (from_env.host, from_env.transport, from_env.log_level) == ("127.0.0.1", "stdio", "info")
    assert (given.port, given.log_format) == (9000, LogFormat.TEXT)


def test_a_bad_setting_names_the_option_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_SHUTDOWN_GRACE", "-1")
    with pytest.raises(ValidationError) as refused:
        ServeSettings.resolve()
    assert settings_problem(refused.value).startswith(
        "invalid shutdown_grace (--shutdown-grace or SIGNOFF_SHUTDOWN_GRACE)"
    )


@pytest.mark.slow
async def test_serve_configured_only_by_the_environment_logs_json_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.update(
        SIGNOFF_TRANSPORT=Transport.HTTP,
        SIGNOFF_PORT=str(port),
        SIGNOFF_LOG_FORMAT="json",
        SIGNOFF_LOG_LEVEL="info",
        SIGNOFF_SHUTDOWN_GRACE="5",
        SIGNOFF_PRINCIPAL="agent-1",
        SIGNOFF_TENANT="acme",
        SIGNOFF_ROLES="billing",
        SIGNOFF_MANIFESTS=str(DEMO_MANIFESTS),
        SIGNOFF_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}",
        SIGNOFF_DEMO_INVOICES_DB=str(tmp_path / "invoices.db"),
    )
    process = await asyncio.create_subprocess_exec(
        SIGNOFF,
        "serve",
        "--fixed-identity",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        async with asyncio.timeout(DEADLINE):
            while True:  # the first JSON line that says uvicorn listens
                line = await process.stderr.readline()
                assert line, "serve exited before listening"
                if "Uvicorn running" in json.loads(line)["message"]:
                    break
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:
            ready = await client.get(f"http://127.0.0.1:{port}/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), DEADLINE) == 0
        rest = [json.loads(raw) for raw in (await process.stderr.read()).splitlines()]
        assert all({"time", "level", "logger", "message"} <= set(entry) for entry in rest)
        assert any(entry["logger"] == "signoff.shutdown" for entry in rest)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
