"""A stored row that cannot be decoded never stops a reader (issue: one request poisons the DB).

The row is written straight into the table the way an older signoff stored a run whose input was
nested ~250 deep (deeper than the JSON reader accepts). Every reader — a run, a list, the tenant's
inbox listing, the expiry sweeper, recovery at start-up, `signoff audit verify` — skips it, logs it
once with its id, counts it, and goes on.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.clock import ManualClock
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from signoff.store.sql import SqlStore
from signoff.store.sql.tables import runs
from tests.helpers import Recorder, definition, proposal
from tests.store.conftest import Backend


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


async def _poison(store: SqlStore, like_run_id: str, poisoned_id: str) -> None:
    """Copy a stored run under a new id with an input nested 250 deep."""
    async with store.engine.begin() as conn:
        row = (
            (await conn.execute(sa.select(runs).where(runs.c.run_id == like_run_id)))
            .mappings()
            .one()
        )
        data = json.loads(row["data"])
        data["run_id"] = poisoned_id
        data["input"] = {"invoice_id": "INV-1", "amount": 10, "note": _nested(250)}
        await conn.execute(
            sa.insert(runs).values({**row, "run_id": poisoned_id, "data": json.dumps(data)})
        )


async def test_an_undecodable_run_row_is_skipped_by_every_reader_logged_once_and_counted(
    sql_backend: Backend, tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = await sql_backend.open_sql()
    clock = ManualClock()
    runtime = Runtime(ActionRegistry([definition(Recorder())]), store, clock=clock)
    waiting = await runtime.propose(
        proposal({"invoice_id": "INV-2", "amount": 5000}, key="k-wait", tenant=tenant)
    )
    assert waiting.code == "APPROVAL_REQUIRED"
    done = await runtime.propose(
        proposal({"invoice_id": "INV-3", "amount": 5}, key="k-done", tenant=tenant)
    )
    # Time-ordered ids: the poisoned copy sorts between the two good runs.
    poisoned = waiting.run_id[:-4] + "ffff"
    assert waiting.run_id < poisoned < done.run_id
    await _poison(store, waiting.run_id, poisoned)

    with caplog.at_level(logging.ERROR, logger="signoff.store"):
        async with store.unit() as unit:
            assert await unit.runs.get(poisoned) is None
            listed = await unit.runs.list(tenant_id=tenant, limit=10)
            # A page of one: the skipped row must not end the listing early.
            first = await unit.runs.list(tenant_id=tenant, limit=1, before_run_id=done.run_id)
            inbox = await unit.runs.list(statuses=[RunStatus.WAITING_APPROVAL], limit=1000)
        assert [r.run_id for r in listed] == [done.run_id, waiting.run_id]
        assert [r.run_id for r in first] == [waiting.run_id]
        assert waiting.run_id in {r.run_id for r in inbox}

        clock.advance(timedelta(days=30))
        assert await runtime.expire_overdue() >= 1
        report = await runtime.recover()
        assert report.expired == 0

    logged = [r for r in caplog.records if poisoned in r.getMessage()]
    assert len(logged) == 1
    assert store.decode_faults.skipped_total >= 4
    assert [row.row_id for row in store.decode_faults.rows()] == [poisoned]
    assert (await runtime.get(waiting.run_id, tenant)) is not None


def test_audit_verify_names_an_undecodable_run_row_and_still_checks_the_rest(
    tmp_path: Path,
) -> None:
    import asyncio

    from signoff.store.sql import open_sql_store

    url = f"sqlite+aiosqlite:///{tmp_path / 'signoff.db'}"

    async def populate() -> tuple[str, str]:
        store = await open_sql_store(url)
        try:
            runtime = Runtime(ActionRegistry([definition(Recorder())]), store)
            good = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 1}))
            bad = good.run_id[:-4] + "ffff"
            await _poison(store, good.run_id, bad)
            return good.run_id, bad
        finally:
            await store.close()

    _good, bad = asyncio.run(populate())
    runner = CliRunner()
    verify = runner.invoke(app, ["audit", "verify", "--database", url])
    assert verify.exit_code == 1
    assert f"run {bad}: its signoff_runs row cannot be decoded" in verify.output
    assert "has audit events but the run itself was deleted" not in verify.output
    listing = runner.invoke(app, ["runs", "list", "--database", url])
    assert listing.exit_code == 0, listing.output
    export = runner.invoke(app, ["audit", "export", "--database", url])
    assert export.exit_code == 0, export.output


async def test_the_inbox_and_the_approvals_api_still_answer_with_an_undecodable_waiting_run(
    sql_backend: Backend,
) -> None:
    from tests.web.support import bearer, site_for_tests, token
    from tests.web.test_inbox import LEAD, sign_in

    store = await sql_backend.open_sql()
    async with site_for_tests(store) as site:
        waiting = await site.propose({"invoice_id": "INV-5", "amount": 5000, "reason": "r"})
        assert waiting.code == "APPROVAL_REQUIRED"
        poisoned = waiting.run_id[:-4] + "ffff"
        await _poison(store, waiting.run_id, poisoned)
        async with site.client(bearer()) as api:
            listing = await api.get("/api/approvals")
            missing = await api.get(f"/api/runs/{poisoned}")
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            inbox = await http.get("/approvals")
    assert listing.status_code == 200
    listed = [r["run_id"] for r in listing.json()["approvals"]]
    assert waiting.run_id in listed and poisoned not in listed
    assert missing.status_code == 404
    assert inbox.status_code == 200 and waiting.run_id in inbox.text
