"""Checkpoint rounds on every store: untouched trails over many tenants and rounds verify clean,
each tampering with rounds, tenants or checkpoints is found, and two instances checkpointing at
once write one round."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa

from signoff.audit.checkpoints import RoundOutcome, checkpoint_heads
from signoff.audit.keys import KeyRing
from signoff.audit.verify import Problem, VerifyReport, verify_trail
from signoff.core.chain import checkpoint_message
from signoff.core.ports import ChainHead, Checkpoint, CheckpointRound, Store
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.maintenance import Maintenance
from signoff.store.sql import create_engine
from tests.helpers import SMALL, Recorder, definition, proposal
from tests.store.conftest import (
    MYSQL_ENV,
    POSTGRES_ENV,
    Backend,
    scratch_database,
)

DEADLINE = 60.0
KEYS = KeyRing.parse(
    {
        "signing_key": "k",
        "keys": [
            {"id": "k", "algorithm": "hmac-sha256", "secret": base64.b64encode(b"k" * 32).decode()}
        ],
    },
    base=Path("."),
)
OWN = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


@contextmanager
def _database(name: str, tmp_path: Path) -> Iterator[str | None]:
    if name == "memory":
        yield None
    elif name == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'rounds.db'}"
    else:
        env, label = (
            (POSTGRES_ENV, "PostgreSQL") if name == "postgres" else (MYSQL_ENV, "MySQL/MariaDB")
        )
        with scratch_database(env, label, migrate=True) as url:
            yield url


@pytest.fixture(params=OWN)
async def own(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A store on a database of its own: rounds and verification are store-wide."""
    with _database(request.param, tmp_path) as url:
        backend = Backend(request.param, url)
        try:
            yield backend
        finally:
            await backend.close_all()


@pytest.fixture(params=OWN[1:])
async def own_sql(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    with _database(request.param, tmp_path) as url:
        backend = Backend(request.param, url)
        try:
            yield backend
        finally:
            await backend.close_all()


class Trail:
    """Real runs through the runtime, one tenant at a time, and checkpoint rounds."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runtime = Runtime(ActionRegistry([definition(Recorder())]), store)
        self.proposed = 0

    async def busy(self, tenants: Sequence[str]) -> None:
        for tenant in tenants:
            self.proposed += 1
            await self.runtime.propose(proposal(SMALL, key=f"k{self.proposed}", tenant=tenant))
        await self.runtime.drain()

    async def round(self) -> RoundOutcome:
        return await checkpoint_heads(self.store, KEYS, datetime.now(UTC))

    async def rounds(self) -> list[CheckpointRound]:
        async with self.store.unit() as unit:
            return await unit.audit.rounds(limit=1000)

    async def verify(self, keys: KeyRing | None = KEYS) -> VerifyReport:
        return await verify_trail(self.store, keys)


def lines(report: VerifyReport) -> list[str]:
    return [problem.line() for problem in report.problems]


def found(report: VerifyReport, where: str, *parts: str) -> list[Problem]:
    return [
        p for p in report.problems if p.where == where and all(part in p.problem for part in parts)
    ]


async def test_many_tenants_over_many_rounds_verify_clean_moved_or_not_and_new_ones_unlisted(
    own: Backend,
) -> None:
    trail = Trail(await own.open())
    tenants = [f"tenant-{n:02d}" for n in range(10)]
    await trail.busy(tenants)
    first = await trail.round()
    assert (first.round, len(first.checkpoints)) == (1, 10)
    for number in range(2, 7):
        moving = tenants[number % 3 :: 3]  # a different third each time; the rest stand still
        await trail.busy(moving)
        outcome = await trail.round()
        assert (outcome.round, len(outcome.checkpoints)) == (number, len(moving))
    assert await trail.round() == RoundOutcome()  # nothing moved: no round
    await trail.busy(["late-1", "late-2", tenants[0]])  # created after the last round
    report = await trail.verify()
    assert lines(report) == []
    assert (report.rounds, report.unverified_rounds, report.tenants) == (6, 0, 12)
    rounds = await trail.rounds()
    assert [r.round for r in rounds] == [1, 2, 3, 4, 5, 6]
    assert all(later.prev_hash == earlier.hash for earlier, later in itertools.pairwise(rounds))
    assert [h.tenant_id for h in rounds[-1].heads] == tenants  # every tenant, moved or not
    assert (await trail.verify(keys=None)).problems == []


async def test_a_tenant_deleted_whole_behind_a_round_is_named(own_sql: Backend) -> None:
    trail = Trail(await own_sql.open())
    await trail.busy(["acme", "victim", "acme"])
    await trail.round()
    await trail.busy(["acme"])
    await trail.round()  # the victim's head did not move; round 2 still lists it
    assert (await trail.verify()).problems == []
    [listed] = [h for h in (await trail.rounds())[-1].heads if h.tenant_id == "victim"]
    await raw(
        own_sql,
        *(
            f"DELETE FROM {table} WHERE tenant_id = 'victim'"
            for table in (
                "signoff_audit_events",
                "signoff_audit_heads",
                "signoff_audit_checkpoints",
                "signoff_runs",
                "signoff_duplicates",
            )
        ),
    )
    report = await trail.verify()
    assert found(report, "tenant 'victim'", f"signed at #{listed.chain_seq} in round 2", "missing")
    assert report.first is not None and report.first.where == "tenant 'victim'"
    assert len(report.problems) == 1, lines(report)
    assert lines(await verify_trail(trail.store, KEYS, "acme")) == []  # acme's own check
    alone = await verify_trail(trail.store, KEYS, "victim")
    assert found(alone, "tenant 'victim'", "in round 2 is missing")


async def test_a_round_deleted_in_the_middle_is_found(own_sql: Backend) -> None:
    trail = await trail_with_rounds(own_sql, 4)
    await raw(own_sql, "DELETE FROM signoff_audit_rounds WHERE round = 2")
    report = await trail.verify()
    assert found(report, "round 3", "round 2 is missing before it")
    assert [p for p in report.problems if "names round 2, which is missing" in p.problem]


async def test_a_round_whose_listing_is_edited_fails_its_signature(own_sql: Backend) -> None:
    trail = await trail_with_rounds(own_sql, 3)
    [listing] = await raw(own_sql, "SELECT heads FROM signoff_audit_rounds WHERE round = 2")
    heads = json.loads(listing[0])
    heads.pop("b")  # as if tenant b had never been checkpointed
    await raw(
        own_sql,
        (
            "UPDATE signoff_audit_rounds SET heads = :heads WHERE round = 2",
            {"heads": json.dumps(heads)},
        ),
    )
    report = await trail.verify()
    assert found(report, "round 2", "its signature does not verify")
    assert found(report, "round 2", "does not match its hash")
    unsigned = await trail.verify(keys=None)  # without the keys, the hash still gives it away
    assert found(unsigned, "round 2", "does not match its hash")


async def test_rounds_renumbered_or_swapped_are_found(own_sql: Backend) -> None:
    trail = await trail_with_rounds(own_sql, 3)
    await raw(
        own_sql,
        "UPDATE signoff_audit_rounds SET round = 0 WHERE round = 2",
        "UPDATE signoff_audit_rounds SET round = 2 WHERE round = 3",
        "UPDATE signoff_audit_rounds SET round = 3 WHERE round = 0",
    )
    report = await trail.verify()
    assert found(report, "round 2", "its signature does not verify")
    assert found(report, "round 3", "its signature does not verify")
    assert found(report, "round 2", "does not link to round 1")
    unsigned = await trail.verify(keys=None)
    assert found(unsigned, "round 2", "does not link to round 1")

    await raw(own_sql, "UPDATE signoff_audit_rounds SET round = 7 WHERE round = 3")
    renumbered = await trail.verify(keys=None)
    assert found(renumbered, "round 7", "rounds 3..6 are missing before it")


async def test_a_deleted_checkpoint_is_found_through_the_round_that_lists_it(
    own_sql: Backend,
) -> None:
    trail = await trail_with_rounds(own_sql, 3)
    [(checkpoint_id, chain_seq)] = await raw(
        own_sql,
        "SELECT id, chain_seq FROM signoff_audit_checkpoints WHERE tenant_id = 'b' AND round = 2",
    )
    await raw(own_sql, f"DELETE FROM signoff_audit_checkpoints WHERE id = {checkpoint_id}")
    report = await trail.verify()
    assert found(report, "round 2", f"lists tenant 'b' at #{chain_seq}", "not stored")


async def test_a_checkpoint_moved_to_another_round_is_found(own_sql: Backend) -> None:
    trail = await trail_with_rounds(own_sql, 3)
    await raw(
        own_sql,
        "UPDATE signoff_audit_checkpoints SET round = 3 WHERE tenant_id = 'b' AND round = 2",
    )
    report = await trail.verify(keys=None)
    assert [p for p in report.problems if "round 3 does not list it" in p.problem], lines(report)


async def test_checkpoints_from_before_rounds_keep_verifying_and_the_first_round_lists_them(
    own: Backend,
) -> None:
    """As a database upgraded past migration 0008 has them: v1 checkpoints, no round yet."""
    store = await own.open()
    trail = Trail(store)
    await trail.busy(["old", "moves"])
    async with store.unit() as unit:
        heads = await unit.audit.heads()
        for head in heads:
            await unit.audit.add_checkpoint(v1_checkpoint(head))
    await trail.busy(["moves"])
    assert (await trail.verify()).problems == []
    outcome = await trail.round()
    assert (outcome.round, [c.tenant_id for c in outcome.checkpoints]) == (1, ["moves"])
    [first] = await trail.rounds()
    assert {h.tenant_id for h in first.heads} == {"old", "moves"}  # "old" did not move
    report = await trail.verify()
    assert lines(report) == []
    assert (report.checkpoints, report.rounds) == (3, 1)


async def test_two_instances_checkpointing_at_once_write_one_round_and_the_loser_says_so(
    own: Backend,
) -> None:
    first, second = await own.open(), await own.open()  # SQL: two engines on one database
    trail = Trail(first)
    await trail.busy(["a", "b"])
    await trail.round()
    await trail.busy(["a", "c"])
    barrier = asyncio.Barrier(2)  # both have read round 1 before either stores round 2
    now = datetime.now(UTC)
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            checkpoint_heads(gated(first, barrier), KEYS, now),
            checkpoint_heads(gated(second, barrier), KEYS, now),
        ),
        DEADLINE,
    )
    won = [o for o in outcomes if o.round is not None]
    lost = [o for o in outcomes if o.lost is not None]
    assert [o.round for o in won] == [2] and [o.lost for o in lost] == [2], outcomes
    assert sorted(c.tenant_id for c in won[0].checkpoints) == ["a", "c"]
    assert [r.round for r in await trail.rounds()] == [1, 2]
    report = await trail.verify()
    assert lines(report) == []
    assert report.checkpoints == 2 + 2  # the loser's unit stored none of its checkpoints


async def test_two_housekeeping_loops_checkpointing_at_once_do_not_fail(own: Backend) -> None:
    """The losing instance's tick signs nothing and reports no failure."""
    first, second = await own.open(), await own.open()
    trail = Trail(first)
    await trail.busy(["a", "b", "c"])
    barrier = asyncio.Barrier(2)
    loops = [
        Maintenance(trail.runtime, gated(store, barrier), audit_keys=KEYS)
        for store in (first, second)
    ]
    reports = await asyncio.wait_for(asyncio.gather(*(loop.tick() for loop in loops)), DEADLINE)
    assert sorted(report.checkpoints for report in reports) == [0, 3]
    assert [report.failures for report in reports] == [[], []]
    assert [r.round for r in await trail.rounds()] == [1]


async def test_a_round_committed_while_verify_runs_is_left_for_the_next_check(
    own: Backend,
) -> None:
    """Between verify's read of the rounds and of the checkpoints, round 2 commits."""
    store = await own.open()
    trail = Trail(store)
    await trail.busy(["a", "b"])
    await trail.round()
    interleaved: list[RoundOutcome] = []

    async def meanwhile() -> None:
        if not interleaved:
            await trail.busy(["a"])
            interleaved.append(await trail.round())

    report = await verify_trail(Intercepted(store, checkpoints=meanwhile).store(), KEYS)
    assert [o.round for o in interleaved] == [2]
    assert lines(report) == []
    assert report.rounds == 1  # round 2 is the next check's
    assert lines(await trail.verify()) == []


class Intercepted:
    """A store whose audit log awaits ``before[name]()`` ahead of each call of ``name``."""

    def __init__(self, store: Store, **before: Callable[[], Awaitable[object]]) -> None:
        self._store = store
        self._before = before

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def store(self) -> Store:
        return cast(Store, self)

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[Any]:
        async with self._store.unit() as unit:
            yield _Unit(unit, self._before)


class _Unit:
    def __init__(self, unit: Any, before: dict[str, Callable[[], Awaitable[object]]]) -> None:
        self._unit = unit
        self.audit = _Audit(unit.audit, before)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._unit, name)


class _Audit:
    def __init__(self, audit: Any, before: dict[str, Callable[[], Awaitable[object]]]) -> None:
        self._audit = audit
        self._before = before

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._audit, name)
        hook = self._before.get(name)
        if hook is None:
            return call

        async def hooked(*args: Any, **kwargs: Any) -> Any:
            await hook()
            return await call(*args, **kwargs)

        return hooked


def gated(store: Store, barrier: asyncio.Barrier) -> Store:
    """``store``, waiting at ``barrier`` right before storing a round."""
    return Intercepted(store, add_round=barrier.wait).store()


def v1_checkpoint(head: ChainHead) -> Checkpoint:
    """A checkpoint as signoff signed it before rounds existed (``signoff.checkpoint.v1``)."""
    now = datetime.now(UTC)
    signer = KEYS.signer
    message = checkpoint_message(
        head.tenant_id, head.chain_seq, head.hash, now, signer.id, signer.algorithm
    )
    return Checkpoint(
        tenant_id=head.tenant_id,
        chain_seq=head.chain_seq,
        head_hash=head.hash,
        at=now,
        key_id=signer.id,
        algorithm=signer.algorithm,
        signature=signer.sign(message),
    )


async def trail_with_rounds(backend: Backend, count: int) -> Trail:
    """Tenants a, b, c; b moves in every round, a only in the first; ``count`` rounds."""
    trail = Trail(await backend.open())
    await trail.busy(["a", "b", "c"])
    await trail.round()
    for number in range(2, count + 1):
        await trail.busy(["b", "c"] if number % 2 else ["b"])
        assert (await trail.round()).round == number
    assert (await trail.verify()).problems == []
    return trail


async def raw(backend: Backend, *statements: str | tuple[str, dict[str, Any]]) -> list[Any]:
    """Statements straight on the database, as an intruder with write access would; the rows
    of the last one if it returns any."""
    assert backend.url is not None
    engine = create_engine(backend.url)
    rows: list[Any] = []
    try:
        async with engine.begin() as conn:
            for statement in statements:
                text, params = statement if isinstance(statement, tuple) else (statement, {})
                result = await conn.execute(sa.text(text), params)
                rows = list(result) if result.returns_rows else []
    finally:
        await engine.dispose()
    return rows
