"""Attacks on PostgreSQL's assumed chain head and per-tenant turns: stores (as processes would)
racing one head at a barrier right before the one-statement units, and cancellations at every
await point; the chain stays linear and no turn is left behind."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest

from signoff.core.ledger import RunLedger
from signoff.core.ports import ChainHead
from signoff.store.sql import SqlStore, postgres_direct
from tests.store.conftest import Backend
from tests.store.samples import scope
from tests.store.test_postgres_units import (
    assert_linear,
    chain,
    done,
    running,
    settled,
)
from tests.store.test_whole_units import FixedClock, proposed

pytestmark = pytest.mark.postgres
STORES = 4
ROUNDS = 5


async def real_head(store: SqlStore, tenant: str) -> ChainHead:
    async with store.unit() as unit:
        return next(h for h in await unit.audit.heads() if h.tenant_id == tenant)


def gate_fast_statements(monkeypatch: pytest.MonkeyPatch, parties: int) -> list[int]:
    """Every one-statement unit (it carries ``b_old_seq``) waits at one barrier right before
    it is sent, so all of them race on the same assumed head."""
    barrier = asyncio.Barrier(parties)
    execute = postgres_direct.execute
    sent: list[int] = []

    async def gated(conn: Any, driver: Any, plan: Any, params: Any) -> Any:
        if "b_old_seq" in params:
            sent.append(1)
            await barrier.wait()
        return await execute(conn, driver, plan, params)

    monkeypatch.setattr(postgres_direct, "execute", gated)
    return sent


async def test_stores_assuming_one_head_at_once_keep_one_chain(
    pg: Backend, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = [await pg.open_sql() for _ in range(STORES)]
    ledgers = [RunLedger(s, FixedClock()) for s in stores]
    await ledgers[0].create(
        (first := running(tenant)), proposed(first), scope=scope(tenant), on_duplicate=None
    )
    sent = gate_fast_statements(monkeypatch, STORES)
    expected = 3
    for _ in range(ROUNDS):
        head = await real_head(stores[0], tenant)
        for s in stores:
            assert s._heads is not None
            s._heads._skip.clear()
            s._heads.committed(head)
            s._heads._heads[tenant] = head
        runs = [running(tenant) for _ in stores]
        await asyncio.gather(
            *(
                ledger.create(r, proposed(r), scope=scope(tenant), on_duplicate=None)
                for ledger, r in zip(ledgers, runs, strict=True)
            )
        )
        expected += 3 * STORES
        head = await real_head(stores[0], tenant)
        for s in stores:
            assert s._heads is not None
            s._heads._skip.clear()
            s._heads._heads[tenant] = head
        outcomes = await asyncio.gather(
            *(
                settled(s, r, done(r), f"settled-{n}")
                for n, (s, r) in enumerate(zip(stores, runs, strict=True))
            )
        )
        assert all(o is not None for o in outcomes)
        expected += STORES
    assert len(sent) == 2 * ROUNDS * STORES  # every unit took the one-statement way
    trail = await chain(stores[0], tenant)
    assert len(trail) == expected
    assert_linear(trail)
    for s in stores:
        assert s._heads is not None and s._heads._turns == {}


async def cancel_some(tasks: Sequence[asyncio.Future[Any]], rnd: random.Random) -> list[Any]:
    """Let ``tasks`` run a random number of loop turns, cancel about a third, collect all."""
    for _ in range(rnd.randrange(1, 40)):
        await asyncio.sleep(0)
    for task in tasks:
        if rnd.random() < 0.3:
            task.cancel()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_cancelled_units_leave_no_turn_and_no_fork(pg: Backend, tenant: str) -> None:
    """Units of two stores on one tenant, cancelled at assorted await points."""
    stores = [await pg.open_sql(), await pg.open_sql()]
    ledgers = [RunLedger(s, FixedClock()) for s in stores]
    rnd = random.Random(7)
    for round_ in range(8):
        runs = [running(tenant) for _ in range(10)]
        tasks = [
            asyncio.ensure_future(
                ledgers[n % 2].create(r, proposed(r), scope=scope(tenant), on_duplicate=None)
            )
            for n, r in enumerate(runs)
        ]
        created = await cancel_some(tasks, rnd)
        live = [r for r, c in zip(runs, created, strict=True) if not isinstance(c, BaseException)]
        settles = [
            asyncio.ensure_future(settled(stores[n % 2], r, done(r), f"s-{round_}-{n}"))
            for n, r in enumerate(live)
        ]
        await cancel_some(settles, rnd)
        for s in stores:
            assert s._heads is not None and s._heads._turns == {}, round_
    assert_linear(await chain(stores[0], tenant))
    for s in stores:  # and the pools still serve
        async with s.unit() as unit:
            await unit.audit.heads()
