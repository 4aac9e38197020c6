"""A process that dies (SIGKILL) in the middle of a group-commit batch on SQLite.

``python -m tests.store.group_commit_worker DB_URL TENANT`` first commits a few batches of
concurrent units, printing ``acked RUN_ID`` for each unit once its ``async with`` has returned.
Then it builds one more batch: a holder unit, ``QUEUED`` units queued behind it, and a last unit
that kills the process from inside its own body once every queued unit has been released into
the batch and none of them committed. It prints ``planned RUN_ID`` for each unit of that batch
before starting it, so the parent knows which rows must not exist.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable

from signoff.store.factory import open_store
from signoff.store.sql import SqlStore
from signoff.store.sql.writer import SqliteWriter
from tests.store.samples import T0, new_run, scope

ACKED_ROUNDS = 3
PER_ROUND = 16
QUEUED = 16
DEADLINE = 30.0


async def until_writer(writer: SqliteWriter, condition: Callable[[int, int], bool]) -> None:
    """Wait (under a deadline) until the writer reports (waiting, uncommitted) meeting
    ``condition``. Install before the work that will meet it starts."""
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()

    def observe(waiting: int, uncommitted: int) -> None:
        if condition(waiting, uncommitted):
            loop.call_soon_threadsafe(ready.set)

    writer.observer = observe
    try:
        async with asyncio.timeout(DEADLINE):
            await ready.wait()
    finally:
        writer.observer = None


async def main(url: str, tenant: str) -> None:
    store = await open_store(url)
    assert isinstance(store, SqlStore) and store.writer is not None
    writer = store.writer

    async def acked_unit() -> None:
        run = new_run(tenant)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            await unit.runs.create(run)
        print(f"acked {run.run_id}", flush=True)

    for _ in range(ACKED_ROUNDS):
        await asyncio.gather(*(acked_unit() for _ in range(PER_ROUND)))

    held, go = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        run = new_run(tenant)
        print(f"planned {run.run_id}", flush=True)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            await unit.runs.create(run)
            held.set()
            await go.wait()
        print(f"acked {run.run_id}", flush=True)

    async def killer() -> None:
        run = new_run(tenant)
        print(f"planned {run.run_id}", flush=True)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            # Every unit before this one is released into the open batch, none committed.
            assert writer.units_uncommitted == QUEUED + 1, writer.units_uncommitted
            os.kill(os.getpid(), signal.SIGKILL)

    async def queued() -> None:
        run = new_run(tenant)
        print(f"planned {run.run_id}", flush=True)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            await unit.runs.create(run)
        print(f"acked {run.run_id}", flush=True)

    tasks = [asyncio.create_task(holder())]
    await held.wait()
    all_queued = asyncio.create_task(until_writer(writer, lambda w, _: w == QUEUED))
    tasks += [asyncio.create_task(queued()) for _ in range(QUEUED)]
    await all_queued
    killer_queued = asyncio.create_task(until_writer(writer, lambda w, _: w == QUEUED + 1))
    tasks.append(asyncio.create_task(killer()))
    await killer_queued
    go.set()
    await asyncio.gather(*tasks)
    print("survived", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
