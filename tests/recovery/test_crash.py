"""Crash recovery with real processes: each test starts signoff in a subprocess that kills
itself with SIGKILL at one durable boundary, then restarts the same instance and recovers.

Afterwards: no lost run, no second non-idempotent side effect, every run terminal or
legitimately waiting, and a retry with the same key never executes twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from signoff import ActionProposal, Channel, Code, Principal, ProposerType, RetryDisposition
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, RunStatus
from signoff.core.runtime import Runtime
from signoff.store.factory import open_store
from tests.recovery.crash_app import INPUT, KEY, effects, registry

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "crash-node"


def _crash(tmp_path: Path, point: str, mode: str, idempotent: bool) -> tuple[str, str]:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    effects_db = str(tmp_path / "effects.db")
    env = {**os.environ, "SIGNOFF_INSTANCE_ID": INSTANCE, "PYTHONPATH": str(ROOT)}
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.recovery.crash_app",
            db_url,
            effects_db,
            point,
            mode,
            "1" if idempotent else "0",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stdout + process.stderr
    return db_url, effects_db


@asynccontextmanager
async def crashed_then_recovered(
    tmp_path: Path, point: str, mode: str, idempotent: bool
) -> AsyncIterator[tuple[Runtime, str, int]]:
    """Crash a process at ``point``, restart the same instance and recover. Yields the runtime,
    the effects file and how many side effects had happened before recovery."""
    db_url, effects_db = _crash(tmp_path, point, mode, idempotent)
    before = len(effects(effects_db))
    store = await open_store(db_url)
    runtime = Runtime(registry(effects_db, mode, idempotent, None), store, instance_id=INSTANCE)
    try:
        await runtime.recover()
        yield runtime, effects_db, before
    finally:
        await store.close()


def _retry() -> ActionProposal:
    return ActionProposal(
        action_id="invoice.cancel",
        input=INPUT,
        principal=Principal(id="agent-1", roles=("billing",)),
        tenant_id="acme",
        channel=Channel.MCP,
        proposer_type=ProposerType.AGENT,
        idempotency_key=KEY,
    )


async def _runs(runtime: Runtime) -> list[ActionRun]:
    return await runtime.list_runs("acme")


async def test_a_crash_before_the_running_commit_leaves_nothing_and_a_retry_runs_once(
    tmp_path: Path,
) -> None:
    async with crashed_then_recovered(
        tmp_path, "before_running_commit", "sync", idempotent=False
    ) as (runtime, effects_db, _):
        assert await _runs(runtime) == []  # never acknowledged, nothing half-recorded
        outcome = await runtime.propose(_retry())
        assert outcome.code == Code.SUCCEEDED
        assert len(effects(effects_db)) == 1


@pytest.mark.parametrize("point", ["after_running_commit", "after_effect"])
async def test_a_non_idempotent_run_caught_mid_flight_goes_to_manual_review_never_twice(
    tmp_path: Path, point: str
) -> None:
    async with crashed_then_recovered(tmp_path, point, "sync", idempotent=False) as (
        runtime,
        effects_db,
        before,
    ):
        (run,) = await _runs(runtime)
        assert run.status is RunStatus.FAILED and run.result is not None
        assert (run.result.code, run.result.retry) == (
            Code.ACTION_INTERRUPTED,
            RetryDisposition.MANUAL_REVIEW,
        )
        replay = await runtime.propose(_retry())
        assert replay.code == Code.ACTION_INTERRUPTED and replay.duplicate_of == run.run_id
        assert len(effects(effects_db)) == before == (1 if point == "after_effect" else 0)


@pytest.mark.parametrize("point", ["after_running_commit", "after_effect"])
async def test_an_idempotent_run_caught_mid_flight_is_redispatched_with_the_same_operation_id(
    tmp_path: Path, point: str
) -> None:
    async with crashed_then_recovered(tmp_path, point, "sync", idempotent=True) as (
        runtime,
        effects_db,
        _,
    ):
        (run,) = await _runs(runtime)
        assert run.status is RunStatus.SUCCEEDED
        assert effects(effects_db) == [run.operation_id]
        replay = await runtime.propose(_retry())
        assert replay.duplicate_of == run.run_id and replay.code == Code.SUCCEEDED
        assert effects(effects_db) == [run.operation_id]


async def test_a_crash_after_external_acceptance_is_redispatched_idempotently_then_completed(
    tmp_path: Path,
) -> None:
    async with crashed_then_recovered(
        tmp_path, "after_external_acceptance", "deferred", idempotent=True
    ) as (runtime, effects_db, _):
        (run,) = await _runs(runtime)
        assert run.status is RunStatus.WAITING_EXTERNAL
        assert effects(effects_db) == [run.operation_id]  # accepted once at the receiver
        assert run.attempt_token is not None
        done = await runtime.complete(run.run_id, run.attempt_token, ExecutionResult.succeeded())
        assert done.accepted and done.code == Code.SUCCEEDED


async def test_a_crash_after_external_acceptance_without_idempotency_needs_review(
    tmp_path: Path,
) -> None:
    async with crashed_then_recovered(
        tmp_path, "after_external_acceptance", "deferred", idempotent=False
    ) as (runtime, effects_db, _):
        (run,) = await _runs(runtime)
        assert run.status is RunStatus.FAILED and run.result is not None
        assert run.result.retry is RetryDisposition.MANUAL_REVIEW
        assert len(effects(effects_db)) == 1


async def test_background_work_accepted_but_never_claimed_is_dispatched_after_a_crash(
    tmp_path: Path,
) -> None:
    async with crashed_then_recovered(
        tmp_path, "before_async_claim", "async", idempotent=False
    ) as (runtime, effects_db, _):
        (run,) = await _runs(runtime)
        assert run.status is RunStatus.SUCCEEDED
        assert effects(effects_db) == [run.operation_id]


async def test_background_work_that_had_started_is_treated_like_a_running_sync_run(
    tmp_path: Path,
) -> None:
    async with crashed_then_recovered(tmp_path, "after_effect", "async", idempotent=False) as (
        runtime,
        effects_db,
        _,
    ):
        (run,) = await _runs(runtime)
        assert run.result is not None and run.result.code == Code.ACTION_INTERRUPTED
        assert len(effects(effects_db)) == 1
