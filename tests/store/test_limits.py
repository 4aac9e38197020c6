"""Cumulative limits at the store: boundaries, sliding windows, subjects, and races that can
never let two contenders take the last unit (every store, and two OS processes)."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from signoff.core.limits import LimitCheck, LimitEntry, LimitSpec, measure, reserve
from signoff.store.sql import SqlStore
from tests.store.conftest import Backend
from tests.store.samples import new_run

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
CONTENDERS = 30
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMIT = LimitSpec(
    name="daily", per="principal", window=timedelta(hours=24), count=5, on_exceed="deny"
)
SUM = LimitSpec(
    name="refunds",
    per="tenant",
    window=timedelta(hours=1),
    sum="input.amount",
    max=1000,
    on_exceed="deny",
)


def check_for(
    tenant: str, spec: LimitSpec = LIMIT, amount: float = 100.0, subject: str = "agent-1"
) -> LimitCheck:
    return LimitCheck(spec, "refund.issue", tenant, subject, amount)


def entries(*ages_and_amounts: tuple[timedelta, float]) -> list[LimitEntry]:
    return [
        LimitEntry(f"r{i}", NOW - age, amount) for i, (age, amount) in enumerate(ages_and_amounts)
    ]


# ---------------------------------------------------------------- boundaries and windows (pure)
def test_exactly_at_count_fits_and_one_more_is_over_by_one() -> None:
    four = entries(*[(timedelta(hours=h), 0) for h in (1, 2, 3, 4)])
    assert not measure(check_for("t"), four, NOW).exceeded  # the 5th of 5
    usage = measure(check_for("t"), [*four, *entries((timedelta(hours=5), 0))], NOW)
    assert usage.exceeded and usage.over_count == 1
    assert "6 of 5 calls, over by 1 call" in usage.describe()


def test_exactly_at_max_sum_fits_and_a_cent_more_is_over() -> None:
    used = entries((timedelta(minutes=5), 600.0), (timedelta(minutes=10), 300.0))
    assert not measure(check_for("t", SUM, 100.0), used, NOW).exceeded
    over = measure(check_for("t", SUM, 100.01), used, NOW)
    assert over.exceeded and round(over.over_sum, 2) == 0.01
    assert over.describe() == "limit 'refunds' (per tenant, 1h): 1000.01 of 1000, over by 0.01"


def test_the_window_slides_and_says_when_it_frees_up() -> None:
    used = entries(
        (timedelta(minutes=50), 400.0),
        (timedelta(minutes=20), 400.0),
        (timedelta(minutes=5), 200.0),
    )
    usage = measure(check_for("t", SUM, 300.0), used, NOW)
    assert usage.exceeded
    assert usage.frees_at == NOW - timedelta(minutes=50) + timedelta(hours=1)
    later = measure(check_for("t", SUM, 300.0), used, NOW + timedelta(minutes=10, microseconds=1))
    assert not later.exceeded  # the oldest 400 slid out
    edge = measure(check_for("t", SUM, 300.0), used, NOW + timedelta(minutes=10))
    assert not edge.exceeded  # a reservation exactly one window old is outside


def test_a_call_over_the_limit_on_its_own_never_frees_up() -> None:
    usage = measure(check_for("t", SUM, 5000.0), [], NOW)
    assert usage.exceeded and usage.frees_at is None
    assert "does not free up" in usage.frees_up()


def test_principal_tenant_and_resource_subjects_are_separate_keys() -> None:
    a, b = check_for("t", subject="agent-1"), check_for("t", subject="agent-2")
    assert a.key != b.key
    assert check_for("t").key != check_for("u").key
    tenant_wide = LimitSpec(name="daily", per="tenant", window=timedelta(hours=24), count=5)
    assert check_for("t", tenant_wide, subject="t").key != check_for("t", subject="t").key


@pytest.mark.parametrize(
    "fields",
    [
        {"count": None},
        {"sum": "input.amount"},
        {"max": 10.0},
        {"window": timedelta(0)},
    ],
)
def test_a_limit_without_a_bound_or_window_is_refused(fields: dict[str, object]) -> None:
    base: dict[str, object] = {"name": "x", "window": timedelta(hours=1), "count": 1}
    with pytest.raises(ValueError):
        LimitSpec.model_validate({**base, **fields})


# ------------------------------------------------------------------------------ store atomicity
async def test_reservations_count_in_the_window_and_release_frees_them(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    for n in range(5):
        async with store.unit() as unit:
            assert not (await reserve(unit.limits, [check_for(tenant)], f"r{n}", NOW)).exceeded
    async with store.unit() as unit:
        assert (await reserve(unit.limits, [check_for(tenant)], "r5", NOW)).exceeded
    async with store.unit() as unit:
        assert await unit.limits.release("r2") == 1
    async with store.unit() as unit:
        assert not (await reserve(unit.limits, [check_for(tenant)], "r7", NOW)).exceeded
    async with store.unit() as unit:
        later = await reserve(unit.limits, [check_for(tenant)], "r8", NOW + timedelta(hours=24))
    assert not later.exceeded  # the whole window slid


async def test_a_rolled_back_unit_holds_nothing(sql_backend: Backend, tenant: str) -> None:
    store = await sql_backend.open()
    with pytest.raises(RuntimeError):
        async with store.unit() as unit:
            await reserve(unit.limits, [check_for(tenant)], "lost", NOW)
            raise RuntimeError("abort")
    async with store.unit() as unit:
        assert await unit.limits.usage(check_for(tenant).key, NOW - timedelta(days=1)) == []


async def test_many_contenders_for_the_last_units_never_exceed_the_limit(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    in_transaction = not (isinstance(store, SqlStore) and store.dialect == "sqlite")
    barrier = asyncio.Barrier(CONTENDERS)

    async def contend(n: int) -> bool:
        if not in_transaction:
            await barrier.wait()
        async with store.unit() as unit:
            if in_transaction:
                if isinstance(store, SqlStore):
                    await unit.runs.create(new_run(tenant))  # an open transaction with a write
                await barrier.wait()
            decision = await reserve(
                unit.limits,
                [check_for(tenant), check_for(tenant, SUM, 150.0, tenant)],
                f"r{n}",
                NOW,
            )
        return not decision.exceeded

    accepted = await asyncio.wait_for(
        asyncio.gather(*(contend(n) for n in range(CONTENDERS))), DEADLINE
    )
    assert sum(accepted) == 5  # count 5 binds before sum 1000 (6 x 150)
    async with store.unit() as unit:
        held = await unit.limits.usage(check_for(tenant).key, NOW - timedelta(days=1))
    assert len(held) == 5


async def test_an_exceeded_deny_limit_holds_nothing_and_an_approval_limit_holds(
    backend: Backend, tenant: str
) -> None:
    store = await backend.open()
    deny = LimitSpec(name="d", window=timedelta(hours=1), count=0, on_exceed="deny")
    ask = LimitSpec(name="a", window=timedelta(hours=1), count=0)
    async with store.unit() as unit:
        denied = await reserve(unit.limits, [check_for(tenant, deny)], "x", NOW)
        parked = await reserve(unit.limits, [check_for(tenant, ask)], "y", NOW)
    assert denied.denied and not parked.denied and parked.needs_approval
    async with store.unit() as unit:
        since = NOW - timedelta(hours=2)
        assert await unit.limits.usage(check_for(tenant, deny).key, since) == []
        assert len(await unit.limits.usage(check_for(tenant, ask).key, since)) == 1


@pytest.mark.slow
async def test_two_processes_racing_for_a_limit_never_exceed_it(
    sql_backend: Backend, tenant: str
) -> None:
    url = sql_backend.url
    assert url is not None
    await sql_backend.open()
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.store.limit_worker",
            url,
            tenant,
            str(CONTENDERS // 2),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]

    async def line(process: asyncio.subprocess.Process) -> str:
        assert process.stdout is not None
        return (await asyncio.wait_for(process.stdout.readline(), DEADLINE)).decode().strip()

    try:
        assert [await line(w) for w in workers] == ["ready", "ready"]
        for w in workers:
            assert w.stdin is not None
            w.stdin.write(b"go\n")
            await w.stdin.drain()
        accepted = [int(await line(w)) for w in workers]
        assert [await asyncio.wait_for(w.wait(), DEADLINE) for w in workers] == [0, 0]
    finally:
        for w in workers:
            if w.returncode is None:
                w.kill()
                await w.wait()
    assert sum(accepted) == 5
