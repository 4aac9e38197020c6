"""The hot path's durable boundaries, counted as real COMMITs on the engine."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from signoff.core.clock import ManualClock
from signoff.core.codes import Code, ExecutionStatus
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.sql import SqlStore
from tests.helpers import NO_APPROVAL, SMALL, Recorder, definition, proposal
from tests.store.conftest import Backend


class CommitCounter:
    def __init__(self, store: SqlStore) -> None:
        self.commits = 0
        for engine in store.sync_engines:
            event.listen(engine, "commit", self._count)

    def _count(self, _conn: Any) -> None:
        self.commits += 1

    def take(self) -> int:
        seen, self.commits = self.commits, 0
        return seen


async def test_a_synchronous_governed_call_commits_exactly_twice(
    sql_backend: Backend, tenant: str
) -> None:
    store = await sql_backend.open_sql()
    counter = CommitCounter(store)
    recorder = Recorder()
    runtime = Runtime(
        ActionRegistry([definition(recorder, approval=NO_APPROVAL)]), store, clock=ManualClock()
    )
    outcome = await runtime.propose(proposal(SMALL, tenant=tenant))
    assert outcome.status is ExecutionStatus.SUCCEEDED
    assert recorder.count == 1
    assert counter.take() == 2  # before the side effect, and after it

    replay = await runtime.propose(proposal(SMALL, tenant=tenant))
    assert replay.duplicate_of == outcome.run_id
    assert counter.take() == 1  # a replayed duplicate records its own run once

    refused = await runtime.propose(proposal({"amount": -1}, tenant=tenant))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    assert counter.take() == 1

    assert await runtime.get(outcome.run_id, tenant) == outcome
    assert counter.take() == 0  # reads never commit
