"""Decision links in every store: stored by hash, redeemed exactly once, never after expiry."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from signoff.core.ports import ApprovalLink
from tests.store.conftest import Backend
from tests.store.samples import T0

CONTENDERS = 16


def link(
    tenant: str, token_hash: str = "a" * 64, ttl: timedelta = timedelta(minutes=15)
) -> ApprovalLink:
    return ApprovalLink(
        token_hash=token_hash,
        run_id=f"run-{tenant}",
        run_version=3,
        tenant_id=tenant,
        approver_id="lead-1",
        approver_roles=("billing-lead", "finance"),
        issued_at=T0,
        expires_at=T0 + ttl,
    )


async def test_an_issued_link_reads_back_field_for_field(backend: Backend, tenant: str) -> None:
    store = await backend.open()
    issued = link(tenant, token_hash=tenant.ljust(64, "0"))
    await store.links.issue(issued)
    assert await store.links.get(issued.token_hash) == issued
    assert await store.links.get("b" * 64) is None


async def test_a_link_is_redeemed_by_exactly_one_of_many_racing_redeemers(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    issued = link(tenant, token_hash=tenant.ljust(64, "1"))
    await store.links.issue(issued)
    stores = [await backend.open() for _ in range(4)]
    start = asyncio.Event()

    async def redeem(i: int) -> bool:
        await start.wait()
        return await stores[i % len(stores)].links.redeem(
            issued.token_hash, T0 + timedelta(minutes=1)
        )

    racers = [asyncio.create_task(redeem(i)) for i in range(CONTENDERS)]
    start.set()
    won = await asyncio.gather(*racers)
    assert won.count(True) == 1
    stored = await store.links.get(issued.token_hash)
    assert stored is not None and stored.used_at == T0 + timedelta(minutes=1)


async def test_an_expired_link_is_never_redeemed_and_is_purged(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    issued = link(tenant, token_hash=tenant.ljust(64, "2"), ttl=timedelta(minutes=5))
    await store.links.issue(issued)
    assert not await store.links.redeem(issued.token_hash, T0 + timedelta(minutes=5))
    assert await store.links.purge(T0 + timedelta(minutes=6)) >= 1
    assert await store.links.get(issued.token_hash) is None
