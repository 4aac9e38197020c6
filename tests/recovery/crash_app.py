"""A tiny signoff application that kills itself (SIGKILL) at a chosen durable boundary.

Run as ``python -m tests.recovery.crash_app DB_URL EFFECTS_DB POINT MODE IDEMPOTENT``. The side
effect is a row in a separate SQLite file (``effects``), committed before the executor returns,
so the test can count how often it really happened. An idempotent executor deduplicates by
operation id, as the contract asks of such receivers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from signoff import ActionDefinition, ExecutionContext
from signoff.core.definition import ApprovalSpec, IdempotencySpec
from signoff.core.ports import Store, StoreUnit
from signoff.core.registry import ActionRegistry

POINTS = (
    "before_running_commit",
    "after_running_commit",
    "after_effect",
    "after_external_acceptance",
    "before_async_claim",
)
INPUT = {"invoice_id": "INV-7", "amount": 70}
KEY = "crash-key"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def record_effect(effects_db: str, operation_id: str, idempotent: bool) -> None:
    with sqlite3.connect(effects_db) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, op TEXT)")
        if idempotent:
            db.execute("CREATE UNIQUE INDEX IF NOT EXISTS effects_op ON effects (op)")
            db.execute("INSERT OR IGNORE INTO effects (op) VALUES (?)", (operation_id,))
        else:
            db.execute("INSERT INTO effects (op) VALUES (?)", (operation_id,))


def effects(effects_db: str) -> list[str]:
    with sqlite3.connect(effects_db) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, op TEXT)")
        return [row[0] for row in db.execute("SELECT op FROM effects ORDER BY n")]


def registry(effects_db: str, mode: str, idempotent: bool, crash_at: str | None) -> ActionRegistry:
    def executor(context: ExecutionContext) -> dict[str, Any]:
        if crash_at == "after_running_commit":
            die()
        record_effect(effects_db, context.operation_id, idempotent)
        if crash_at in ("after_effect", "after_external_acceptance"):
            die()
        return {"operation_id": context.operation_id}

    definition = ActionDefinition(
        id="invoice.cancel",
        effect="write",
        input_schema={"type": "object"},
        idempotency=IdempotencySpec(key="required", scope="principal"),
        approval=ApprovalSpec(when="false"),
        executor=executor,
        mode=mode,
        executor_idempotent=idempotent,
    )
    return ActionRegistry([definition])


class CrashingStore:
    """Dies inside the first unit of work, after its writes and before its commit."""

    def __init__(self, inner: Store, crash_in_unit: int) -> None:
        self.inner = inner
        self.crash_in_unit = crash_in_unit
        self.units = 0

    @property
    def workers(self) -> Any:
        return self.inner.workers

    @property
    def links(self) -> Any:
        return self.inner.links

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[StoreUnit]:
        async with self.inner.unit() as unit:
            yield unit
            self.units += 1
            if self.units == self.crash_in_unit:
                die()

    async def wait_for_change(self, run_id: str, version: int, timeout: float) -> None:
        await self.inner.wait_for_change(run_id, version, timeout)

    async def close(self) -> None:
        await self.inner.close()


async def main(db_url: str, effects_db: str, point: str, mode: str, idempotent: bool) -> None:
    from signoff import ActionProposal, Channel, Principal, ProposerType
    from signoff.core.runtime import Runtime
    from signoff.store.factory import open_store

    store: Store = await open_store(db_url)
    if point == "before_running_commit":
        store = CrashingStore(store, crash_in_unit=1)
    elif point == "before_async_claim":
        store = CrashingStore(store, crash_in_unit=2)  # the lane's claim, right after acceptance
    runtime = Runtime(
        registry(effects_db, mode, idempotent, point),
        store,
        instance_id=os.environ["SIGNOFF_INSTANCE_ID"],
    )
    await runtime.propose(
        ActionProposal(
            action_id="invoice.cancel",
            input=INPUT,
            principal=Principal(id="agent-1", roles=("billing",)),
            tenant_id="acme",
            channel=Channel.MCP,
            proposer_type=ProposerType.AGENT,
            idempotency_key=KEY,
        )
    )
    await runtime.drain()
    print("survived", flush=True)


if __name__ == "__main__":
    url, effects_path, crash_point, executor_mode, flag = sys.argv[1:6]
    assert crash_point in POINTS, crash_point
    asyncio.run(main(url, effects_path, crash_point, executor_mode, flag == "1"))
