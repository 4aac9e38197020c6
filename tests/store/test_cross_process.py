"""Two OS processes, one database, the same idempotency keys: exactly one side effect each."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from signoff.core.codes import Code, ExecutionStatus
from signoff.core.results import ActionOutcome
from tests.store.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 12
DEADLINE = 60.0


class Worker:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, url: str, effects: Path, tenant: str) -> Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.pipeline_worker",
            url,
            str(effects),
            tenant,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def line(self) -> str:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), DEADLINE)
        if not raw:
            raise AssertionError(f"worker exited with {await self.process.wait()}")
        return raw.decode().strip()

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{text}\n".encode())

    async def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), DEADLINE)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


@pytest.mark.slow
async def test_two_processes_proposing_the_same_key_cause_exactly_one_side_effect(
    sql_backend: Backend, tenant: str, tmp_path: Path
) -> None:
    url = sql_backend.url
    assert url is not None
    await (await sql_backend.open()).close()  # create and migrate the database first
    effects = tmp_path / "effects.txt"
    workers = [await Worker.start(url, effects, tenant) for _ in range(2)]
    try:
        assert [await w.line() for w in workers] == ["ready", "ready"]
        for round_ in range(ROUNDS):
            # Both processes are parked on stdin; one write each releases them together.
            for w in workers:
                w.send(f"go key-{round_}")
            outcomes = [ActionOutcome.model_validate_json(await w.line()) for w in workers]
            originals = [o for o in outcomes if o.duplicate_of is None]
            assert len(originals) == 1, outcomes
            original = originals[0]
            (other,) = [o for o in outcomes if o is not original]
            assert original.status is ExecutionStatus.SUCCEEDED
            assert other.duplicate_of == original.run_id
            assert other.code in (Code.SUCCEEDED, Code.DUPLICATE_IN_PROGRESS)
    finally:
        for w in workers:
            await w.stop()
    effect_lines = effects.read_text().splitlines()
    assert len(effect_lines) == ROUNDS + 2  # one per round, plus each worker's warm-up
    assert [w.process.returncode for w in workers] == [0, 0]
