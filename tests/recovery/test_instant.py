"""Instant dead-holder detection (contract §2) with real processes killed by SIGKILL.

A holder on this host whose process is gone, or whose database session has ended (PostgreSQL
advisory lock, MariaDB ``GET_LOCK``, a flock beside the SQLite file), is dead at once: ``signoff
recover`` run right after the kill settles its run. A live instance's run is never taken.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from signoff.app import Settings, start_application
from signoff.cli import app
from signoff.core.codes import Code
from signoff.core.ports import Liveness
from signoff.core.run import ActionRun, RunStatus
from signoff.store.factory import open_store
from signoff.store.sql import SqlStore
from signoff.store.sql.tables import workers
from tests.recovery.holder_app import write_manifest
from tests.store.conftest import MYSQL_ENV, POSTGRES_ENV, scratch_database

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
DIALECTS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]
runner = CliRunner()


@pytest.fixture(params=DIALECTS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own (recover settles every dead holder's runs in it)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    elif request.param == "postgres":
        with scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True) as url:
            yield url
    else:
        with scratch_database(MYSQL_ENV, "MySQL/MariaDB", migrate=True) as url:
            yield url


@dataclass
class Holder:
    process: subprocess.Popen[str]
    run_id: str

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=DEADLINE) == -signal.SIGKILL


@contextmanager
def holder(url: str, manifests: Path) -> Iterator[Holder]:
    """A live instance in its own process, holding one RUNNING run mid-side-effect."""
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_INSTANCE_ID"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.recovery.holder_app", url, str(manifests)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        line = lines.get(timeout=DEADLINE)
        assert line.startswith("executing "), line
        yield Holder(process, line.split()[1])
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=DEADLINE)
        stdout.close()


def recover(url: str, manifests: Path) -> dict[str, object]:
    result = runner.invoke(
        app, ["recover", "--json", "--database", url, "--manifests", str(manifests)]
    )
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.stdout)
    return report


async def _run(url: str, run_id: str) -> ActionRun:
    store = await open_store(url)
    try:
        async with store.unit() as unit:
            run = await unit.runs.get(run_id)
    finally:
        await store.close()
    assert run is not None
    return run


def stored(url: str, run_id: str) -> ActionRun:
    return asyncio.run(_run(url, run_id))


def test_signoff_recover_right_after_a_kill_settles_the_crashed_run(
    database: str, tmp_path: Path
) -> None:
    manifests = write_manifest(tmp_path / "manifests")
    with holder(database, manifests) as live:
        live.kill()
        report = recover(database, manifests)

    assert report["interrupted"] == [live.run_id]
    _assert_interrupted(database, live.run_id)


async def _start_and_stop(url: str, manifests: Path) -> None:
    application = await start_application(Settings(database_url=url, manifests_dir=manifests))
    await application.close()


def test_the_next_server_start_right_after_a_kill_settles_the_crashed_run(
    database: str, tmp_path: Path
) -> None:
    manifests = write_manifest(tmp_path / "manifests")
    with holder(database, manifests) as live:
        live.kill()
        asyncio.run(_start_and_stop(database, manifests))

    _assert_interrupted(database, live.run_id)


def _assert_interrupted(database: str, run_id: str) -> None:
    run = stored(database, run_id)
    assert run.status is RunStatus.FAILED
    assert run.result is not None and run.result.code == Code.ACTION_INTERRUPTED


def test_a_live_instances_running_run_is_never_taken_and_is_settled_once_it_dies(
    database: str, tmp_path: Path
) -> None:
    manifests = write_manifest(tmp_path / "manifests")
    with holder(database, manifests) as live:
        while_alive = recover(database, manifests)
        still = stored(database, live.run_id)
        live.kill()
        after = recover(database, manifests)

    assert (while_alive["interrupted"], while_alive["skipped_live"]) == ([], 1)
    assert still.status is RunStatus.RUNNING
    assert after["interrupted"] == [live.run_id]


async def _liveness(url: str, worker_id: str, change: dict[str, object]) -> Liveness:
    store = await open_store(url)
    assert isinstance(store, SqlStore)
    try:
        if change:
            async with store.engine.begin() as conn:
                await conn.execute(
                    sa.update(workers).where(workers.c.worker_id == worker_id).values(**change)
                )
        found = await store.workers.liveness([worker_id])
    finally:
        await store.close()
    return found[worker_id]


@pytest.mark.parametrize(
    ("signal_left", "change", "alive", "dead"),
    [
        ("the database session", {"host": "another-host"}, Liveness.ALIVE, Liveness.DEAD),
        ("the process", {"lock_name": None}, Liveness.ALIVE, Liveness.DEAD),
        (
            "nothing",
            {"host": "another-host", "lock_name": None},
            Liveness.UNKNOWN,
            Liveness.UNKNOWN,
        ),
    ],
)
def test_each_signal_alone_tells_a_dead_holder_from_a_live_one(
    database: str,
    tmp_path: Path,
    signal_left: str,
    change: dict[str, object],
    alive: Liveness,
    dead: Liveness,
) -> None:
    manifests = write_manifest(tmp_path / "manifests")
    with holder(database, manifests) as live:
        worker_id = stored(database, live.run_id).worker_id
        assert worker_id is not None
        before = asyncio.run(_liveness(database, worker_id, change))
        live.kill()
        after = asyncio.run(_liveness(database, worker_id, {}))

    assert (before, after) == (alive, dead), signal_left
