"""The chain covers a run's substance (contract §12): editing a stored run's input, approved
input, amendments, decisions, principal, result or output — its events untouched — is found by
``audit verify`` on SQLite and PostgreSQL, while the same trail untouched verifies clean."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import sqlalchemy as sa

from signoff import ApprovalSpec, Principal
from signoff.audit.verify import verify_trail
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.sql import SqlStore
from tests.helpers import LEAD, LEAD2, Recorder, approve, definition, proposal
from tests.store.conftest import Backend

PAIR = ApprovalSpec(when="input.amount > 1000.0", approver_roles=("billing-lead",), count=2)
AMEND = PAIR.model_copy(update={"amend": ("amount",)})
SUBSTANCE = "AUDIT_SUBSTANCE_MISMATCH"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[SqlStore]:
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    backend = Backend(request.param, url)
    try:
        yield await backend.open_sql()
    finally:
        await backend.close_all()


@dataclass
class Trail:
    store: SqlStore
    tenant: str
    plain: str
    amended: str


async def populate(store: SqlStore, tenant: str) -> Trail:
    runtime = Runtime(ActionRegistry([definition(Recorder(), approval=AMEND)]), store)
    plain = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}, tenant=tenant))
    big = await runtime.propose(
        proposal({"invoice_id": "INV-2", "amount": 5000}, key="k2", tenant=tenant)
    )
    await runtime.decide(big.run_id, tenant, replace(approve(LEAD), amendments={"amount": 4000}))
    await runtime.decide(big.run_id, tenant, approve(LEAD2))
    await runtime.drain()
    return Trail(store, tenant, plain.run_id, big.run_id)


@pytest.fixture
async def trail(store: SqlStore, tenant: str) -> Trail:
    return await populate(store, tenant)


async def edit(trail: Trail, run_id: str, path: list[str], value: Any) -> None:
    """Rewrite one field of a stored run's JSON, as someone with database access would."""
    async with trail.store.engine.begin() as conn:
        (data,) = (
            await conn.execute(
                sa.text("SELECT data FROM signoff_runs WHERE run_id = :id"), {"id": run_id}
            )
        ).one()
        document = json.loads(data)
        node = document
        for key in path[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(path[-1]) if isinstance(node, list) else path[-1]] = value
        await conn.execute(
            sa.text("UPDATE signoff_runs SET data = :data WHERE run_id = :id"),
            {"data": json.dumps(document), "id": run_id},
        )


async def findings(trail: Trail) -> list[tuple[str | None, str]]:
    report = await verify_trail(trail.store, tenant_id=trail.tenant)
    return [(p.code, p.line()) for p in report.problems]


async def test_an_untouched_amended_trail_verifies_clean(trail: Trail) -> None:
    assert await findings(trail) == []


@pytest.mark.parametrize(
    ("which", "path", "value", "names"),
    [
        ("plain", ["input"], {"to": "ATTACKER", "amount": 1000000}, "stored input"),
        ("plain", ["input", "amount"], 11, "stored input"),
        ("plain", ["result", "output", "done", "amount"], 0, "stored result"),
        ("plain", ["principal", "id"], "someone-else", "principal"),
        ("plain", ["principal", "roles"], ["admin"], "principal"),
        ("amended", ["approved_input", "amount"], 1, "approved input"),
        ("amended", ["amendments", "0", "approver_id"], "mallory", "amendments"),
        ("amended", ["approval", "decisions", "0", "approver_id"], "mallory", "decisions"),
        ("amended", ["approval", "decisions", "1", "digest"], "0" * 64, "decisions"),
    ],
)
async def test_editing_a_stored_run_substance_is_found(
    trail: Trail, which: str, path: list[str], value: Any, names: str
) -> None:
    run_id = trail.plain if which == "plain" else trail.amended
    await edit(trail, run_id, path, value)
    found = await findings(trail)
    assert any(code == SUBSTANCE and names in line and run_id in line for code, line in found), (
        found
    )


async def test_a_principal_edited_in_the_run_row_and_its_data_is_found(trail: Trail) -> None:
    async with trail.store.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE signoff_runs SET principal_id = 'x' WHERE run_id = :id"),
            {"id": trail.plain},
        )
    await edit(trail, trail.plain, ["principal", "id"], "x")
    assert any(code == SUBSTANCE for code, _ in await findings(trail))


def test_the_digests_name_every_part_of_the_substance() -> None:
    """The roles of the principal are part of what it digests (an elevated run is found)."""
    from signoff.core import substance

    agent = Principal(id="a", roles=("billing",))
    admin = Principal(id="a", roles=("admin",))
    assert substance.principal_digest(agent, "t") != substance.principal_digest(admin, "t")
    assert substance.principal_digest(agent, "t") != substance.principal_digest(agent, "u")
