"""Completion and cancellation races, and recovery shared by several instances, on real databases."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from signoff import Code, ExecutionContext, ExecutionResult, ExecutionStatus
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from tests.helpers import AGENT, NO_APPROVAL, definition, proposal
from tests.recovery.recover_worker import shared_registry
from tests.store.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
SQL_ONLY = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


class Provider:
    def __init__(self) -> None:
        self.cancels: list[str] = []
        self.lock = threading.Lock()

    async def send(self, context: ExecutionContext) -> dict[str, Any]:
        return {"ref": context.operation_id}

    async def cancel(self, context: ExecutionContext) -> None:
        with self.lock:
            self.cancels.append(context.operation_id)


def _in_threads(count: int, work: Any) -> list[Any]:
    results: list[Any] = [None] * count

    def main(index: int) -> None:
        results[index] = asyncio.run(work(index))

    threads = [threading.Thread(target=main, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE)
    return results


@pytest.mark.parametrize("repetition", range(3))
def test_complete_and_cancel_racing_on_separate_connections_converge_on_one_result(
    sql_backend: Backend, tenant: str, repetition: int
) -> None:
    provider = Provider()
    registry = ActionRegistry(
        [definition(provider.send, mode="deferred", approval=NO_APPROVAL, cancel=provider.cancel)]
    )
    url = sql_backend.url
    assert url is not None

    async def setup() -> tuple[str, str]:
        from signoff.store.factory import open_store

        store = await open_store(url)
        try:
            runtime = Runtime(registry, store)
            outcome = await runtime.propose(
                proposal({"invoice_id": "INV-1", "amount": 1}, tenant=tenant)
            )
            run = await runtime.get_run(outcome.run_id, tenant)
            assert run is not None and run.status is RunStatus.WAITING_EXTERNAL
            assert run.attempt_token is not None
            return run.run_id, run.attempt_token
        finally:
            await store.close()

    run_id, token = _in_threads(1, lambda _: setup())[0]
    contenders = 8
    barrier = threading.Barrier(contenders, timeout=DEADLINE)

    async def contend(index: int) -> Any:
        from signoff.store.factory import open_store

        store = await open_store(url)  # its own engine and connections: a separate instance
        try:
            runtime = Runtime(registry, store, instance_id=f"node-{index}")
            await store.wait_for_change(run_id, 0, 0)  # warm the connection before the barrier
            barrier.wait()
            if index % 2:
                return await runtime.cancel(run_id, tenant, AGENT)
            return await runtime.complete(run_id, token, ExecutionResult.succeeded({"i": index}))
        finally:
            await store.close()

    answers = _in_threads(contenders, contend)

    async def final() -> Any:
        from signoff.store.factory import open_store

        store = await open_store(url)
        try:
            return await Runtime(registry, store).get(run_id, tenant)
        finally:
            await store.close()

    outcome = _in_threads(1, lambda _: final())[0]
    assert outcome.status in (ExecutionStatus.SUCCEEDED, ExecutionStatus.CANCELLED)
    completions = [a for a in answers if hasattr(a, "accepted")]
    cancels = [a for a in answers if not hasattr(a, "accepted")]
    winners = [a for a in completions if a.accepted] + [
        c for c in cancels if c.code == Code.ACTION_CANCELLED
    ]
    assert len(winners) == 1
    for cancel in cancels:
        if cancel is not winners[0]:
            assert cancel.code == Code.ACTION_RUN_ALREADY_TERMINAL
            assert cancel.status == outcome.status
    for completion in completions:
        if completion is not winners[0]:
            assert completion.outcome.status == outcome.status


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", SQL_ONLY)
async def test_two_instances_recovering_one_database_handle_each_run_exactly_once(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path, tenant: str
) -> None:
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
        if backend_name == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    calls = tmp_path / "calls.txt"
    from signoff.store.factory import open_store

    store = await open_store(url)
    dead = Runtime(shared_registry(str(calls)), store, instance_id="dead-node")
    original_dispatch = dead._dispatcher.dispatch

    async def die_before_dispatch(action: Any, run: Any) -> Any:
        if action.id == "invoice.cancel":
            from signoff.core.answers import outcome_of

            return outcome_of(run)  # the process "dies" right after the RUNNING commit
        return await original_dispatch(action, run)

    dead._dispatcher.dispatch = die_before_dispatch  # type: ignore[method-assign]
    running, waiting = [], []
    for i in range(10):
        running.append(
            (
                await dead.propose(
                    proposal({"invoice_id": f"INV-{i}", "amount": 1}, key=f"r{i}", tenant=tenant)
                )
            ).run_id
        )
        waiting.append(
            (
                await dead.propose(
                    proposal(
                        {"invoice_id": f"INV-{i}", "amount": 1},
                        key=f"w{i}",
                        tenant=tenant,
                        action="payment.send",
                    )
                )
            ).run_id
        )
    await store.close()
    calls.write_text("")

    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.recovery.recover_worker",
            url,
            str(calls),
            f"node-{n}",
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert (await asyncio.wait_for(worker.stdout.readline(), DEADLINE)).strip() == b"ready"
        for worker in workers:  # both parked on stdin: released together
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            await worker.stdin.drain()
        reports = []
        for worker in workers:
            assert worker.stdout is not None
            reports.append(json.loads(await asyncio.wait_for(worker.stdout.readline(), DEADLINE)))
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.kill()
            await worker.wait()

    redispatched = [r for report in reports for r in report["redispatched"]]
    assert sorted(redispatched) == sorted(running)  # each dead run taken by exactly one instance
    assert sum(report["orphaned"] for report in reports) == len(waiting)
    per_operation = Counter(line.split()[0] for line in calls.read_text().splitlines())
    assert len(per_operation) == len(running) and set(per_operation.values()) == {1}

    store = await open_store(url)
    try:
        checker = Runtime(shared_registry(str(calls)), store)
        for run_id in running:
            run = await checker.get_run(run_id, tenant)
            assert run is not None and run.status is RunStatus.SUCCEEDED
        for run_id in waiting:
            outcome = await checker.get(run_id, tenant)
            assert outcome is not None and outcome.code == Code.ACTION_EXTERNAL_TIMEOUT
            async with store.unit() as unit:
                events = await unit.audit.list_for_run(run_id)
            assert [e.kind for e in events].count("external_timeout") == 1
    finally:
        await store.close()
