"""The background lane is shared: one tenant filling its share while another's async work starts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from signoff import Code, ExecutionContext, ExecutionStatus
from signoff.core.dispatch import AsyncLane
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import NO_APPROVAL, definition, proposal

SMALL = {"invoice_id": "INV-1", "amount": 10}
DEADLINE = 10.0


class SlowWork:
    """An async executor that holds its place until released, telling who started."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: dict[str, int] = {}
        self.changed = asyncio.Condition()

    async def __call__(self, context: ExecutionContext) -> dict[str, Any]:
        async with self.changed:
            self.started[context.tenant_id] = self.started.get(context.tenant_id, 0) + 1
            self.changed.notify_all()
        await self.release.wait()
        return {}

    async def until(self, tenant: str, count: int) -> None:
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: self.started.get(tenant, 0) >= count), DEADLINE
            )


async def test_one_tenant_filling_its_share_leaves_another_tenants_work_admitted_and_started() -> (
    None
):
    work = SlowWork()
    lane = AsyncLane(max_concurrency=4, max_pending=16, tenant_share=0.5)
    registry = ActionRegistry([definition(work, mode="async", approval=NO_APPROVAL)])
    runtime = Runtime(registry, InMemoryStore(), lane=lane)
    # The flooding tenant: its share of the 20 places is 10; the eleventh is refused.
    answers = [
        await runtime.propose(proposal(SMALL, key=f"flood-{i}", tenant="flood")) for i in range(30)
    ]
    accepted = [a for a in answers if a.status is ExecutionStatus.ACCEPTED]
    refused = [a for a in answers if a.code == Code.ACTION_LANE_FULL]
    assert (len(accepted), len(refused)) == (10, 20)
    await work.until("flood", 2)
    assert work.started["flood"] == 2  # its share of the four running places
    # Another tenant is admitted and its work starts while the flood's still holds its places.
    other = await runtime.propose(proposal(SMALL, key="mine", tenant="acme"))
    assert other.status is ExecutionStatus.ACCEPTED
    await work.until("acme", 1)
    assert work.started["flood"] == 2
    work.release.set()
    await runtime.drain()
    assert lane.held_by("flood") == lane.held_by("acme") == 0


def test_a_tenant_share_outside_zero_to_one_is_refused() -> None:
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match="tenant share"):
            AsyncLane(tenant_share=share)
