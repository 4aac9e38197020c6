"""SQLite group commit: concurrent units share one transaction and one fsync, yet each commits or
fails alone, and nobody is answered before the commit that made their unit durable."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from signoff.core.ports import AuditEvent, RunAlreadyExists, StoreUnit
from signoff.store.errors import StoreError
from signoff.store.sql import SqlStore, open_sql_store
from signoff.store.sql import writer as writer_module
from tests.store.group_commit_worker import until_writer
from tests.store.samples import T0, new_run, scope

ROOT = Path(__file__).resolve().parents[2]
QUEUED = 12


class Boom(Exception):
    pass


def committed_run_ids(path: Path) -> set[str]:
    """What another connection sees: only committed rows."""
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT run_id FROM signoff_runs")}


def committed_owners(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT owner_run_id FROM signoff_duplicates")}


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> Any:
    store = await open_sql_store(f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}")
    assert isinstance(store, SqlStore) and store.writer is not None
    try:
        yield store, tmp_path / "signoff.db"
    finally:
        await store.close()


async def test_one_failing_unit_in_a_batch_rolls_back_alone_and_the_rest_commit_once(
    sqlite_store: tuple[SqlStore, Path], tenant: str
) -> None:
    store, path = sqlite_store
    writer = store.writer
    assert writer is not None
    taken = new_run(tenant)
    async with store.unit() as unit:
        await unit.runs.create(taken)
    commits = 0

    def count(_conn: Any) -> None:
        nonlocal commits
        commits += 1

    event.listen(writer.engine, "commit", count)
    held, go = asyncio.Event(), asyncio.Event()
    seen_at_answer: dict[str, bool] = {}

    async def holder() -> str:
        run = new_run(tenant)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            await unit.runs.create(run)
            held.set()
            await go.wait()
        seen_at_answer[run.run_id] = run.run_id in committed_run_ids(path)
        return run.run_id

    async def queued(index: int) -> str:
        # Unit 4 fails in its body; unit 8 fails in a statement (its run id is taken).
        run = taken.model_copy(update={"action_id": "other"}) if index == 8 else new_run(tenant)
        owner = f"owner-{index}-{run.run_id}"
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), owner, "h", T0)
            await unit.runs.create(run)
            await unit.audit.append(
                [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="proposed", at=T0)]
            )
            if index == 4:
                raise Boom
        seen_at_answer[run.run_id] = run.run_id in committed_run_ids(path)
        return owner

    first = asyncio.create_task(holder())
    await held.wait()
    all_queued = asyncio.create_task(until_writer(writer, lambda waiting, _: waiting == QUEUED))
    tasks = [asyncio.create_task(queued(i)) for i in range(QUEUED)]
    await all_queued
    go.set()
    outcomes = await asyncio.gather(first, *tasks, return_exceptions=True)

    assert isinstance(outcomes[1 + 4], Boom)
    assert isinstance(outcomes[1 + 8], RunAlreadyExists)
    succeeded = [o for o in outcomes if isinstance(o, str)]
    assert len(succeeded) == QUEUED - 1
    assert commits == 1, "the holder and the queued units should share one commit"
    assert len(seen_at_answer) == QUEUED - 1
    assert all(seen_at_answer.values()), "a caller was answered before its unit was committed"
    owners = committed_owners(path)
    assert set(succeeded[1:]) <= owners
    assert not any(o.startswith(("owner-4-", "owner-8-")) for o in owners)
    async with store.unit() as unit:
        assert await unit.runs.get(taken.run_id) == taken  # the failed create changed nothing
        assert len(await unit.audit.list_for_run(taken.run_id)) == 0


def test_a_crash_in_the_middle_of_a_batch_loses_no_acknowledged_unit(
    tmp_path: Path, tenant: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"
    process = subprocess.run(
        [sys.executable, "-m", "tests.store.group_commit_worker", url, tenant],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert process.returncode == -signal.SIGKILL, process.stdout + process.stderr
    lines = [line.split(" ", 1) for line in process.stdout.splitlines()]
    acked = {run_id for word, run_id in lines if word == "acked"}
    planned = {run_id for word, run_id in lines if word == "planned"}
    assert len(acked) == 3 * 16 and len(planned) == 16 + 2
    assert not acked & planned, "a unit of the killed batch was answered before its commit"

    db = tmp_path / "signoff.db"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    stored = committed_run_ids(db)
    assert acked <= stored, "an acknowledged unit was lost"
    assert not planned & stored, "part of the uncommitted batch survived the crash"
    assert not planned & committed_owners(db)


async def test_a_heartbeat_queues_behind_a_writing_unit_on_the_writer_and_then_commits(
    sqlite_store: tuple[SqlStore, Path], tenant: str
) -> None:
    store, _path = sqlite_store
    writer = store.writer
    assert writer is not None
    held, go = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        run = new_run(tenant)
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), run.run_id, "h", T0)
            held.set()
            await go.wait()

    holding = asyncio.create_task(holder())
    await held.wait()
    queued = asyncio.create_task(until_writer(writer, lambda waiting, _: waiting == 1))
    beat = asyncio.create_task(store.workers.heartbeat(f"{tenant}/1", T0))
    await queued
    assert not beat.done()
    go.set()
    await asyncio.gather(holding, beat)
    assert await store.workers.last_seen([f"{tenant}/1"]) == {f"{tenant}/1": T0}


def test_a_caller_whose_event_loop_closed_mid_unit_does_not_stop_the_writer(
    tmp_path: Path,
) -> None:
    """A CLI's ``asyncio.run`` can end while its unit is still on the writer thread: the reply
    then has nowhere to go, and the writer must keep serving the next caller."""
    import threading

    from sqlalchemy.engine import make_url

    from signoff.store.sql.writer import SqliteWriter

    writer = SqliteWriter(make_url(f"sqlite:///{tmp_path / 'w.db'}"))
    entered, release = threading.Event(), threading.Event()

    def held(conn: Any) -> None:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        entered.set()
        assert release.wait(timeout=30)

    async def leave_mid_unit() -> None:
        asyncio.get_running_loop().create_task(writer.unit_of_one(held))
        assert await asyncio.to_thread(entered.wait, 30)
        # Returning now: asyncio.run cancels the unit's task and closes this loop.

    asyncio.run(leave_mid_unit())
    release.set()

    async def next_caller() -> None:
        try:
            async with asyncio.timeout(30):
                await writer.unit_of_one(
                    lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (1)")
                )
        finally:
            await writer.close()

    asyncio.run(next_caller())
    with sqlite3.connect(tmp_path / "w.db") as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (1,)


async def test_whole_units_share_one_commit_and_a_failing_one_rolls_back_alone(
    sqlite_store: tuple[SqlStore, Path], tenant: str
) -> None:
    """``run_unit`` bodies run on the writer thread, one job each, in the same group commit."""
    store, path = sqlite_store
    writer = store.writer
    assert writer is not None
    taken = new_run(tenant)
    async with store.unit() as unit:
        await unit.runs.create(taken)
    commits = 0

    def count(_conn: Any) -> None:
        nonlocal commits
        commits += 1

    event.listen(writer.engine, "commit", count)
    held, go = asyncio.Event(), asyncio.Event()
    seen_at_answer: dict[str, bool] = {}

    async def holder() -> None:
        async with store.unit() as unit:
            await unit.duplicates.reserve(scope(tenant), f"holder-{tenant}", "h", T0)
            held.set()
            await go.wait()

    async def queued(index: int) -> str:
        # Unit 4 fails in its body; unit 8 fails in a statement (its run id is taken).
        run = taken.model_copy(update={"action_id": "other"}) if index == 8 else new_run(tenant)
        owner = f"owner-{index}-{run.run_id}"

        async def body(unit: StoreUnit) -> str:
            await unit.duplicates.reserve(scope(tenant), owner, "h", T0)
            await unit.runs.create(run)
            await unit.audit.append(
                [AuditEvent(run_id=run.run_id, tenant_id=tenant, kind="proposed", at=T0)]
            )
            if index == 4:
                raise Boom
            return owner

        answer = await store.run_unit(body)
        seen_at_answer[run.run_id] = run.run_id in committed_run_ids(path)
        return answer

    first = asyncio.create_task(holder())
    await held.wait()
    all_queued = asyncio.create_task(until_writer(writer, lambda waiting, _: waiting == QUEUED))
    tasks = [asyncio.create_task(queued(i)) for i in range(QUEUED)]
    await all_queued
    go.set()
    outcomes = await asyncio.gather(first, *tasks, return_exceptions=True)

    assert isinstance(outcomes[1 + 4], Boom)
    assert isinstance(outcomes[1 + 8], RunAlreadyExists)
    succeeded = [o for o in outcomes[1:] if isinstance(o, str)]
    assert len(succeeded) == QUEUED - 2
    assert commits == 1, "the holder and the queued units should share one commit"
    assert len(seen_at_answer) == QUEUED - 2
    assert all(seen_at_answer.values()), "a caller was answered before its unit was committed"
    owners = committed_owners(path)
    assert set(succeeded) <= owners
    assert not any(o.startswith(("owner-4-", "owner-8-")) for o in owners)
    async with store.unit() as unit:
        assert await unit.runs.get(taken.run_id) == taken
        assert len(await unit.audit.list_for_run(taken.run_id)) == 0


async def test_a_whole_unit_that_waits_on_anything_but_its_store_is_refused_and_rolled_back(
    sqlite_store: tuple[SqlStore, Path], tenant: str
) -> None:
    store, path = sqlite_store
    run = new_run(tenant)

    async def body(unit: StoreUnit) -> None:
        await unit.runs.create(run)
        await asyncio.sleep(0)  # suspends: there is no event loop on the writer thread

    with pytest.raises(RuntimeError, match="awaited something other than its store"):
        await store.run_unit(body)
    assert run.run_id not in committed_run_ids(path)


async def test_a_unit_that_waits_for_its_turn_longer_than_busy_timeout_is_refused_alone(
    sqlite_store: tuple[SqlStore, Path], tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer is held by a step-by-step unit that does not end (what a nested writing unit
    in one task does): a whole unit queued behind it gives up after ``busy_timeout`` with the
    store's "database is locked" error, having written nothing; the holder still commits."""
    store, path = sqlite_store
    holder, waiter = new_run(tenant), new_run(tenant)

    async def queued(unit: StoreUnit) -> None:
        await unit.runs.create(waiter)

    async with store.unit() as unit:
        reserved = await unit.duplicates.reserve(scope(tenant), holder.run_id, "h", T0)
        assert reserved.accepted  # the writer now runs this unit until it ends
        # Short only for the unit queued behind it (the bound is read per unit).
        with monkeypatch.context() as short:
            short.setattr(writer_module, "SQLITE_BUSY_TIMEOUT_MS", 300)
            with pytest.raises(StoreError, match="database is locked"):
                await asyncio.wait_for(store.run_unit(queued), timeout=30)
        assert store.writer is not None and store.writer.units_waiting == 0
        await unit.runs.create(holder)
    assert committed_run_ids(path) >= {holder.run_id}
    assert waiter.run_id not in committed_run_ids(path)
    await store.run_unit(queued)  # the writer serves the next unit as usual
    assert waiter.run_id in committed_run_ids(path)


async def test_a_unit_whose_turn_bound_passes_while_it_runs_is_answered_with_its_outcome(
    sqlite_store: tuple[SqlStore, Path], tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound is on waiting for a turn, not on the unit's own work: when it passes while the
    whole unit already runs on the writer (a slow body, a slow fsync), the unit commits and its
    caller hears so - never "database is locked" for a unit that is stored."""
    store, path = sqlite_store
    writer = store.writer
    assert writer is not None
    run = new_run(tenant)
    bound_passed = threading.Event()
    send = writer._send

    def watched(item: Any) -> None:
        if type(item).__name__ == "_Expired":
            bound_passed.set()
        send(item)

    monkeypatch.setattr(writer, "_send", watched)
    monkeypatch.setattr(writer_module, "SQLITE_BUSY_TIMEOUT_MS", 200)

    async def body(unit: StoreUnit) -> str:
        await unit.runs.create(run)
        assert bound_passed.wait(30)  # on the writer thread: still running when the bound passed
        return run.run_id

    assert await asyncio.wait_for(store.run_unit(body), timeout=60) == run.run_id
    assert run.run_id in committed_run_ids(path)
